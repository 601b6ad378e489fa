// What a node knows of its GPUs, as values both sides of the node protocol share: the
// inventory (GPUs, MIG devices, NVLink peers), one reading of a GPU with its processes,
// and the events (XIDs) a GPU provider reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  bool mps = false;  // the node's agent can run MPS control daemons (set by the agent, not the provider)
  // The agent's container probe (agent/container_probe.h): whether container jobs run here,
  // and why not (set by the agent; an agent that says nothing is taken to run them).
  bool containers = true;
  std::string containers_problem;
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
  int64_t xid_events = -1;  // XID events seen since the agent started (-1: not counted): a new one
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

}  // namespace gantry
