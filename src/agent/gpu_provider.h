// Where the agent learns about its GPUs: one interface, several providers chosen at run
// time. NVML (dlopen'd, no build-time dependency), nvidia-smi output parsing as a last
// resort, and a fake provider for machines without GPUs and for tests (utilization that
// follows the jobs on each GPU, and faults injected on demand).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace gantry {

struct MigDeviceInfo {
  std::string uuid;     // MIG-...
  std::string profile;  // e.g. 3g.40gb
  int gpu_instance = -1;
  int compute_instance = -1;
  int start = -1;  // first memory slice of its GPU instance; -1 when unknown
};

// A MIG instance by what the scheduler knows of it: profile name and first slice.
struct MigInstanceSpec {
  std::string profile;
  int start = 0;
  bool operator==(const MigInstanceSpec&) const = default;
};

struct GpuInfo {
  int index = 0;
  std::string uuid;
  std::string name;  // product name as the driver reports it ("NVIDIA H100 80GB HBM3")
  std::string pci_bus_id;
  int64_t memory_total_mib = 0;
  bool mig_enabled = false;
  std::vector<MigDeviceInfo> mig_devices;
  std::vector<int> nvlink_peers;  // indices of GPUs reachable over NVLink, where readable
};

struct GpuInventory {
  std::string provider;  // nvml, nvidia-smi, fake
  std::string driver_version;
  std::vector<GpuInfo> gpus;
};

struct GpuProcess {
  int pid = 0;
  int64_t used_memory_mib = 0;
  int sm_util = -1;       // %, -1 when unknown
  int gpu_instance = -1;  // MIG: the GPU instance the process runs in
  std::string job_id;     // the job that owns the process (filled in by the agent)
};

// One reading of one GPU; -1 (or empty) where the provider cannot read a value.
struct GpuSample {
  std::string uuid;
  double util_pct = -1;
  double mem_util_pct = -1;  // memory bandwidth busy, not capacity
  int64_t mem_used_mib = -1;
  int64_t mem_total_mib = -1;
  double temperature_c = -1;
  double power_w = -1;
  double power_limit_w = -1;
  int sm_clock_mhz = -1;
  int64_t ecc_corrected = -1;    // volatile
  int64_t ecc_uncorrected = -1;  // volatile
  int64_t retired_pages = -1;
  int remap_pending = -1;  // 1 when a row remap waits for a reset
  bool lost = false;       // the GPU stopped answering (XID 79, GPU_IS_LOST)
  int last_xid = 0;
  // DCGM only (-1 where absent): profiling ratios (0..1) and lifetime ECC counts.
  double sm_active = -1;
  double sm_occupancy = -1;
  double tensor_active = -1;
  double dram_active = -1;
  int64_t ecc_uncorrected_lifetime = -1;
  std::vector<GpuProcess> processes;
};

struct GpuEvent {
  std::string uuid;
  int xid = 0;  // 0: not an XID
  std::string what;
};

class GpuProvider {
 public:
  virtual ~GpuProvider() = default;
  virtual std::string name() const = 0;
  virtual Expected<GpuInventory> Inventory() = 0;
  virtual Expected<std::vector<GpuSample>> Sample() = 0;
  // XID and other events since the last call, waiting up to timeout_ms for the first; with
  // none, it returns after timeout_ms (the agent's loop is paced by this wait).
  virtual std::vector<GpuEvent> Events(int timeout_ms) = 0;
  // Whether Events() reports XIDs as they happen (else only readings carry the last one).
  virtual bool DeliversXidEvents() const { return false; }
  // Re-partitions a MIG GPU: destroys the listed instances (which must be unused), then
  // creates the new ones. Returns the GPU's MIG devices afterwards.
  virtual Expected<std::vector<MigDeviceInfo>> ApplyMig(const std::string& gpu_uuid,
                                                        const std::vector<MigInstanceSpec>& destroy,
                                                        const std::vector<MigInstanceSpec>& create);
};

inline Expected<std::vector<MigDeviceInfo>> GpuProvider::ApplyMig(const std::string&,
                                                                  const std::vector<MigInstanceSpec>&,
                                                                  const std::vector<MigInstanceSpec>&) {
  return Status::Internal(name() + " cannot create or destroy MIG instances");
}

// NVML through dlopen of `library` (default libnvidia-ml.so.1, or $GANTRY_NVML_LIBRARY);
// null with `why` when it cannot be used.
std::unique_ptr<GpuProvider> OpenNvmlProvider(std::string* why, std::string library = "");
// DCGM (libdcgm.so.4, .so.3, or $GANTRY_DCGM_LIBRARY) in embedded mode over `base`: the
// base provider's readings, processes, events and MIG calls, with DCGM's profiling fields,
// lifetime ECC and last XID added. Returns `base` unchanged, with `why`, when DCGM cannot
// be used.
std::unique_ptr<GpuProvider> WithDcgm(std::unique_ptr<GpuProvider> base, std::string* why, std::string library = "");
// `nvidia-smi --query-gpu=... --format=csv` parsing; null with `why` when it fails.
std::unique_ptr<GpuProvider> OpenNvidiaSmiProvider(std::string* why);

// This machine's GPUs: `which` is auto (NVML, else nvidia-smi), nvml or nvidia-smi; DCGM is
// added on top when its library loads. Null with `why` (each provider's reason) when none.
std::unique_ptr<GpuProvider> DetectGpuProvider(const std::string& which, std::string* why);

// Parsers of nvidia-smi output, exposed for tests.
Expected<GpuInventory> ParseNvidiaSmiInventory(const std::string& csv);
Expected<std::vector<GpuSample>> ParseNvidiaSmiSamples(const std::string& csv);

}  // namespace gantry
