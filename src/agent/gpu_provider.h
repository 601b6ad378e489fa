// Where the agent learns about its GPUs: one interface, several providers chosen at run
// time. NVML (dlopen'd, no build-time dependency), nvidia-smi output parsing as a last
// resort, and a fake provider for machines without GPUs and for tests (utilization that
// follows the jobs on each GPU, and faults injected on demand).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "protocol/gpu_readings.h"

namespace gantry {

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

// Told what the agent runs on each GPU: the fake provider makes its readings follow the
// jobs with it (real GPUs measure their own load).
class GpuLoadSink {
 public:
  virtual ~GpuLoadSink() = default;
  // What runs on a GPU now: the jobs' total share (0..1), GPU memory, and each process
  // (pid, its GPU memory in MiB).
  virtual void SetLoad(const std::string& uuid, double share, int64_t memory_mib,
                       std::vector<std::pair<int, int64_t>> processes) = 0;
};

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
