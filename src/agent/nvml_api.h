// The slice of NVML the agent uses, loaded with dlopen: return codes, the structs laid out
// as the header has them on x86_64 (sizes checked), and one function pointer per entry
// point, looked up by its versioned name (dlsym does not apply the header's _v2/_v3
// macros). A null pointer means the library lacks the call: "not supported".
#pragma once

#include <dlfcn.h>

#include <string>
#include <vector>

#include "agent/gpu_provider.h"

namespace gantry::nvml {

using Return = int;
using Device = void*;
using EventSet = void*;
using GpuInstance = void*;
using ComputeInstance = void*;

constexpr Return kSuccess = 0;
constexpr Return kNotSupported = 3;
constexpr Return kNotFound = 6;
constexpr Return kInsufficientSize = 7;
constexpr Return kGpuIsLost = 15;
constexpr unsigned long long kEventXid = 0x8;
constexpr unsigned long long kEventDoubleBitEcc = 0x2;
constexpr unsigned kMaxNvLinks = 18;
constexpr int kNvLinkRemoteSwitch = 2;  // nvmlIntNvLinkDeviceType_t: GPU 0, IBMNPU 1, SWITCH 2
constexpr unsigned kGpuInstanceProfileInfoV2 = 0x02000098;
constexpr unsigned kComputeEngineShared = 0;

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned gpu, memory;
};
struct ProcessInfo {
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id;
};
struct ProcessUtilizationSample {
  unsigned pid;
  unsigned long long time_stamp;  // µs
  unsigned sm_util, mem_util, enc_util, dec_util;
};
struct EventData {
  Device device;
  unsigned long long event_type, event_data;
  unsigned gpu_instance_id, compute_instance_id;
};
struct Placement {
  unsigned start, size;  // memory slices
};
struct GpuInstanceProfileInfoV2 {
  unsigned version;
  unsigned id, is_p2p_supported, slice_count, instance_count, multiprocessor_count, copy_engine_count, decoder_count,
      encoder_count, jpeg_count, ofa_count;
  unsigned long long memory_size_mb;
  char name[96];
};
struct GpuInstanceInfo {
  Device device;
  unsigned id, profile_id;
  Placement placement;
};
struct ComputeInstanceProfileInfo {
  unsigned id, slice_count, instance_count, multiprocessor_count, shared_copy_engine_count, shared_decoder_count,
      shared_encoder_count, shared_jpeg_count, shared_ofa_count;
};
static_assert(sizeof(PciInfo) == 68);
static_assert(sizeof(Memory) == 24);
static_assert(sizeof(Utilization) == 8);
static_assert(sizeof(ProcessInfo) == 24);
static_assert(sizeof(ProcessUtilizationSample) == 32);
static_assert(sizeof(EventData) == 32);
static_assert(sizeof(GpuInstanceProfileInfoV2) == 152);
static_assert(sizeof(GpuInstanceInfo) == 24);
static_assert(sizeof(ComputeInstanceProfileInfo) == 36);

struct Api {
  void* lib = nullptr;
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*driver_version)(char*, unsigned) = nullptr;
  Return (*count)(unsigned*) = nullptr;
  Return (*handle_by_index)(unsigned, Device*) = nullptr;
  Return (*uuid)(Device, char*, unsigned) = nullptr;
  Return (*name)(Device, char*, unsigned) = nullptr;
  Return (*pci)(Device, PciInfo*) = nullptr;
  Return (*memory)(Device, Memory*) = nullptr;
  Return (*utilization)(Device, Utilization*) = nullptr;
  Return (*temperature)(Device, int, unsigned*) = nullptr;
  Return (*power)(Device, unsigned*) = nullptr;
  Return (*power_limit)(Device, unsigned*) = nullptr;
  Return (*clock)(Device, int, unsigned*) = nullptr;
  Return (*ecc)(Device, int, int, unsigned long long*) = nullptr;
  Return (*retired_pages)(Device, int, unsigned*, unsigned long long*) = nullptr;
  Return (*remapped_rows)(Device, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  Return (*processes)(Device, unsigned*, ProcessInfo*) = nullptr;
  Return (*mps_processes)(Device, unsigned*, ProcessInfo*) = nullptr;  // MPS clients (NVML lists their server above)
  Return (*process_utilization)(Device, ProcessUtilizationSample*, unsigned*, unsigned long long) = nullptr;
  Return (*event_set_create)(EventSet*) = nullptr;
  Return (*supported_events)(Device, unsigned long long*) = nullptr;
  Return (*register_events)(Device, unsigned long long, EventSet) = nullptr;
  Return (*event_wait)(EventSet, EventData*, unsigned) = nullptr;
  Return (*event_set_free)(EventSet) = nullptr;
  // NVLink
  Return (*nvlink_state)(Device, unsigned, int*) = nullptr;
  Return (*nvlink_remote_pci)(Device, unsigned, PciInfo*) = nullptr;
  Return (*nvlink_remote_type)(Device, unsigned, int*) = nullptr;
  // MIG: reading
  Return (*mig_mode)(Device, unsigned*, unsigned*) = nullptr;
  Return (*max_mig)(Device, unsigned*) = nullptr;
  Return (*mig_handle)(Device, unsigned, Device*) = nullptr;
  Return (*gi_id)(Device, unsigned*) = nullptr;
  Return (*ci_id)(Device, unsigned*) = nullptr;
  Return (*gi_by_id)(Device, unsigned, GpuInstance*) = nullptr;
  Return (*gi_info)(GpuInstance, GpuInstanceInfo*) = nullptr;
  // MIG: changing (root)
  Return (*gi_profile_info)(Device, unsigned, GpuInstanceProfileInfoV2*) = nullptr;
  Return (*gi_placements)(Device, unsigned, Placement*, unsigned*) = nullptr;
  Return (*gi_create)(Device, unsigned, const Placement*, GpuInstance*) = nullptr;
  Return (*gi_destroy)(GpuInstance) = nullptr;
  Return (*ci_profile_info)(GpuInstance, unsigned, unsigned, ComputeInstanceProfileInfo*) = nullptr;
  Return (*ci_create)(GpuInstance, unsigned, ComputeInstance*) = nullptr;
  Return (*ci_by_id)(GpuInstance, unsigned, ComputeInstance*) = nullptr;
  Return (*ci_destroy)(ComputeInstance) = nullptr;

  template <typename F>
  void Load(F*& fn, const char* symbol) {
    fn = reinterpret_cast<F*>(dlsym(lib, symbol));
  }
  // Looks every entry point up; false when the library is not there.
  bool Open(const char* path);
  std::string Error(Return rc) const;  // "Insufficient Permissions (4)"
  std::string Uuid(Device d) const;
};

// The MIG devices (GPU instance + compute instance) on a parent GPU, with their slots.
std::vector<MigDeviceInfo> MigDevices(const Api& api, Device parent);
// Destroys the listed (unused) instances, then creates the new ones, each a GPU instance at
// its slot with one compute instance over all of it. Refuses when a process runs in an
// instance to destroy. Returns the GPU's MIG devices afterwards.
Expected<std::vector<MigDeviceInfo>> ApplyMig(const Api& api, Device parent,
                                              const std::vector<MigInstanceSpec>& destroy,
                                              const std::vector<MigInstanceSpec>& create);

}  // namespace gantry::nvml
