// A stand-in libnvidia-ml for tests on machines without GPUs: the NVML entry points the
// agent calls, with the real names, signatures and struct layouts, over two simulated
// "NVIDIA H100 80GB HBM3" GPUs. GPU 0 is in MIG mode with H100 profile IDs and placements;
// GPU 1 is whole, joined to GPU 0 by two NVLinks. Tests drive it through the stub_nvml_*
// calls at the bottom (processes, XIDs) and read what the agent did (instances made).
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/nvml_api.h"

using namespace gantry::nvml;

namespace {

constexpr Return kInvalidArgument = 2;
constexpr Return kTimeout = 10;
constexpr Return kInUse = 19;

enum Tag { kGpuTag = 1, kInstanceTag = 2, kComputeTag = 3 };

struct Proc {
  unsigned pid;
  unsigned long long bytes;
  unsigned gi;  // 0xFFFFFFFF: not MIG
  unsigned sm;
  bool mps_client = false;  // listed by the MPS call; the plain list shows its server instead
};

constexpr unsigned kMpsServerPid = 9999;

struct Gpu;
struct Instance {
  int tag = kInstanceTag;
  Gpu* parent = nullptr;
  unsigned id = 0, profile_index = 0, start = 0, size = 0;
  bool has_ci = false;
  int ci_tag = kComputeTag;  // the compute instance's handle is &ci_tag
  std::string uuid;
};

struct Gpu {
  int tag = kGpuTag;
  unsigned index = 0;
  std::string uuid, bus;
  bool mig = false;
  std::vector<Proc> procs;
  std::vector<std::unique_ptr<Instance>> instances;
  unsigned next_gi = 1;
};

struct Profile {
  unsigned index, id, slices, memory_slices;
  const char* name;
  std::vector<unsigned> starts;
};

const std::vector<Profile>& Profiles() {
  static const std::vector<Profile> p = {{0, 19, 1, 1, "1g.10gb", {0, 1, 2, 3, 4, 5, 6}},
                                         {1, 14, 2, 2, "2g.20gb", {0, 2, 4}},
                                         {2, 9, 3, 4, "3g.40gb", {0, 4}},
                                         {3, 5, 4, 4, "4g.40gb", {0}},
                                         {4, 0, 7, 8, "7g.80gb", {0}},
                                         {7, 20, 1, 1, "1g.10gb+me", {0, 1, 2, 3, 4, 5, 6}},
                                         {9, 15, 1, 2, "1g.20gb", {0, 2, 4, 6}}};
  return p;
}

const Profile* ProfileById(unsigned id) {
  for (const Profile& p : Profiles()) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

std::mutex mu;
Gpu gpus[2];
std::deque<EventData> events;
int creates = 0, destroys = 0;

bool set_up = false;

void Setup() {
  if (set_up) return;
  set_up = true;
  for (unsigned i = 0; i < 2; ++i) {
    gpus[i] = Gpu{};
    gpus[i].index = i;
    gpus[i].uuid = "GPU-stub-000" + std::to_string(i);
    gpus[i].bus = "00000000:0" + std::to_string(i + 7) + ":00.0";
  }
  gpus[0].mig = true;
  // One 3g.40gb made before the agent started, at slice 4.
  auto inst = std::make_unique<Instance>();
  inst->parent = &gpus[0];
  inst->id = gpus[0].next_gi++;
  inst->profile_index = 2;
  inst->start = 4;
  inst->size = 4;
  inst->has_ci = true;
  inst->uuid = "MIG-stub-existing";
  gpus[0].instances.push_back(std::move(inst));
}

Gpu* AsGpu(Device d) {
  Gpu* g = static_cast<Gpu*>(d);
  return g && g->tag == kGpuTag ? g : nullptr;
}
Instance* AsInstance(void* d) {
  Instance* i = static_cast<Instance*>(d);
  return i && i->tag == kInstanceTag ? i : nullptr;
}
// A MIG device handle is its instance's handle (the one compute instance spans it).
std::vector<Instance*> MigDevicesOf(Gpu& g) {
  std::vector<Instance*> out;
  for (auto& i : g.instances) {
    if (i->has_ci) out.push_back(i.get());
  }
  return out;
}

void Copy(const std::string& s, char* out, unsigned length) {
  std::strncpy(out, s.c_str(), length - 1);
  out[length - 1] = 0;
}

}  // namespace

extern "C" {

Return nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(mu);
  Setup();
  return kSuccess;
}
Return nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(Return rc) { return rc == kInUse ? "In use by another client" : "Stub error"; }
Return nvmlSystemGetDriverVersion(char* v, unsigned n) {
  Copy("550.54.15", v, n);
  return kSuccess;
}
Return nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 2;
  return kSuccess;
}
Return nvmlDeviceGetHandleByIndex_v2(unsigned i, Device* d) {
  if (i >= 2) return kInvalidArgument;
  *d = &gpus[i];
  return kSuccess;
}
Return nvmlDeviceGetUUID(Device d, char* out, unsigned n) {
  std::lock_guard<std::mutex> lock(mu);
  if (Gpu* g = AsGpu(d)) {
    Copy(g->uuid, out, n);
  } else if (Instance* i = AsInstance(d)) {
    Copy(i->uuid, out, n);
  } else {
    return kInvalidArgument;
  }
  return kSuccess;
}
Return nvmlDeviceGetName(Device d, char* out, unsigned n) {
  std::lock_guard<std::mutex> lock(mu);
  std::string name = "NVIDIA H100 80GB HBM3";
  if (Instance* i = AsInstance(d)) {
    for (const Profile& p : Profiles()) {
      if (p.index == i->profile_index) name += std::string(" MIG ") + p.name;
    }
  }
  Copy(name, out, n);
  return kSuccess;
}
Return nvmlDeviceGetPciInfo_v3(Device d, PciInfo* pci) {
  Gpu* g = AsGpu(d);
  if (!g) return kInvalidArgument;
  std::memset(pci, 0, sizeof(*pci));
  Copy(g->bus, pci->bus_id, sizeof(pci->bus_id));
  return kSuccess;
}
Return nvmlDeviceGetMemoryInfo(Device d, Memory* m) {
  std::lock_guard<std::mutex> lock(mu);
  Gpu* g = AsGpu(d);
  if (!g) return kInvalidArgument;
  m->total = 81559ull << 20;
  m->used = 0;
  for (const Proc& p : g->procs) m->used += p.bytes;
  m->free = m->total - m->used;
  return kSuccess;
}
Return nvmlDeviceGetUtilizationRates(Device d, Utilization* u) {
  std::lock_guard<std::mutex> lock(mu);
  Gpu* g = AsGpu(d);
  if (!g || g->mig) return kNotSupported;  // as on real MIG GPUs
  u->gpu = g->procs.empty() ? 0 : 87;
  u->memory = g->procs.empty() ? 0 : 41;
  return kSuccess;
}
Return nvmlDeviceGetTemperature(Device, int, unsigned* t) {
  *t = 41;
  return kSuccess;
}
Return nvmlDeviceGetPowerUsage(Device, unsigned* mw) {
  *mw = 123456;
  return kSuccess;
}
Return nvmlDeviceGetEnforcedPowerLimit(Device, unsigned* mw) {
  *mw = 700000;
  return kSuccess;
}
// The plain list (MPS clients folded into one server process) or the MPS clients' list.
Return ListProcs(Device d, unsigned* count, ProcessInfo* infos, bool mps_list) {
  std::lock_guard<std::mutex> lock(mu);
  Gpu* g = AsGpu(d);
  if (!g) return kInvalidArgument;
  std::vector<ProcessInfo> list;
  unsigned long long server_bytes = 0;
  for (const Proc& p : g->procs) {
    if (p.mps_client) server_bytes += p.bytes;
    if (p.mps_client == mps_list) list.push_back({p.pid, p.bytes, p.gi, 0});
  }
  if (!mps_list && server_bytes > 0) list.push_back({kMpsServerPid, server_bytes, 0xFFFFFFFFu, 0});
  unsigned n = static_cast<unsigned>(list.size());
  if (!infos || *count < n) {
    *count = n;
    return n == 0 ? kSuccess : kInsufficientSize;
  }
  for (unsigned i = 0; i < n; ++i) infos[i] = list[i];
  *count = n;
  return kSuccess;
}
Return nvmlDeviceGetComputeRunningProcesses_v3(Device d, unsigned* count, ProcessInfo* infos) {
  return ListProcs(d, count, infos, false);
}
Return nvmlDeviceGetMPSComputeRunningProcesses_v3(Device d, unsigned* count, ProcessInfo* infos) {
  return ListProcs(d, count, infos, true);
}
Return nvmlDeviceGetProcessUtilization(Device d, ProcessUtilizationSample* out, unsigned* count, unsigned long long) {
  std::lock_guard<std::mutex> lock(mu);
  Gpu* g = AsGpu(d);
  if (!g || g->mig) return kNotSupported;
  unsigned n = static_cast<unsigned>(g->procs.size());
  if (n == 0) return kNotFound;
  if (!out || *count < n) {
    *count = n;
    return kInsufficientSize;
  }
  for (unsigned i = 0; i < n; ++i) out[i] = {g->procs[i].pid, 1000000ull + i, g->procs[i].sm, 10, 0, 0};
  *count = n;
  return kSuccess;
}
Return nvmlEventSetCreate(EventSet* set) {
  *set = &events;
  return kSuccess;
}
Return nvmlDeviceGetSupportedEventTypes(Device, unsigned long long* types) {
  *types = kEventXid | kEventDoubleBitEcc | 0x4;
  return kSuccess;
}
Return nvmlDeviceRegisterEvents(Device, unsigned long long, EventSet) { return kSuccess; }
Return nvmlEventSetWait_v2(EventSet, EventData* data, unsigned) {
  std::lock_guard<std::mutex> lock(mu);
  if (events.empty()) return kTimeout;
  *data = events.front();
  events.pop_front();
  return kSuccess;
}
Return nvmlEventSetFree(EventSet) { return kSuccess; }

// NVLink: GPU 0 and GPU 1 are joined by links 0 and 1; the other links are down.
Return nvmlDeviceGetNvLinkState(Device d, unsigned link, int* active) {
  if (!AsGpu(d) || link >= kMaxNvLinks) return kInvalidArgument;
  *active = link < 2 ? 1 : 0;
  return kSuccess;
}
Return nvmlDeviceGetNvLinkRemoteDeviceType(Device, unsigned, int* type) {
  *type = 0;  // GPU
  return kSuccess;
}
Return nvmlDeviceGetNvLinkRemotePciInfo_v2(Device d, unsigned link, PciInfo* pci) {
  Gpu* g = AsGpu(d);
  if (!g || link >= 2) return kNotSupported;
  std::memset(pci, 0, sizeof(*pci));
  Copy(gpus[1 - g->index].bus, pci->bus_id, sizeof(pci->bus_id));
  return kSuccess;
}

// MIG
Return nvmlDeviceGetMigMode(Device d, unsigned* current, unsigned* pending) {
  Gpu* g = AsGpu(d);
  if (!g) return kInvalidArgument;
  *current = *pending = g->mig ? 1 : 0;
  return kSuccess;
}
Return nvmlDeviceGetMaxMigDeviceCount(Device d, unsigned* n) {
  Gpu* g = AsGpu(d);
  if (!g) return kInvalidArgument;
  *n = g->mig ? 7 : 0;
  return kSuccess;
}
Return nvmlDeviceGetMigDeviceHandleByIndex(Device d, unsigned index, Device* mig) {
  std::lock_guard<std::mutex> lock(mu);
  Gpu* g = AsGpu(d);
  if (!g) return kInvalidArgument;
  std::vector<Instance*> devices = MigDevicesOf(*g);
  if (index >= devices.size()) return kNotFound;
  *mig = devices[index];
  return kSuccess;
}
Return nvmlDeviceGetGpuInstanceId(Device d, unsigned* id) {
  Instance* i = AsInstance(d);
  if (!i) return kNotSupported;
  *id = i->id;
  return kSuccess;
}
Return nvmlDeviceGetComputeInstanceId(Device d, unsigned* id) {
  if (!AsInstance(d)) return kNotSupported;
  *id = 0;
  return kSuccess;
}
Return nvmlDeviceGetGpuInstanceById(Device d, unsigned id, GpuInstance* gi) {
  std::lock_guard<std::mutex> lock(mu);
  Gpu* g = AsGpu(d);
  if (!g) return kInvalidArgument;
  for (auto& i : g->instances) {
    if (i->id == id) {
      *gi = i.get();
      return kSuccess;
    }
  }
  return kNotFound;
}
Return nvmlGpuInstanceGetInfo(GpuInstance gi, GpuInstanceInfo* info) {
  Instance* i = AsInstance(gi);
  if (!i) return kInvalidArgument;
  const Profile* p = nullptr;
  for (const Profile& q : Profiles()) {
    if (q.index == i->profile_index) p = &q;
  }
  *info = {i->parent, i->id, p ? p->id : 0, {i->start, i->size}};
  return kSuccess;
}
Return nvmlDeviceGetGpuInstanceProfileInfoV(Device d, unsigned index, GpuInstanceProfileInfoV2* info) {
  if (!AsGpu(d) || info->version != kGpuInstanceProfileInfoV2) return kInvalidArgument;
  if (index >= 15) return kInvalidArgument;
  for (const Profile& p : Profiles()) {
    if (p.index != index) continue;
    std::memset(reinterpret_cast<char*>(info) + sizeof(unsigned), 0, sizeof(*info) - sizeof(unsigned));
    info->id = p.id;
    info->slice_count = p.slices;
    info->memory_size_mb = 10240ull * p.memory_slices;
    Copy(std::string("MIG ") + p.name, info->name, sizeof(info->name));
    return kSuccess;
  }
  return kNotSupported;
}
Return nvmlDeviceGetGpuInstancePossiblePlacements_v2(Device d, unsigned id, Placement* out, unsigned* count) {
  const Profile* p = ProfileById(id);
  if (!AsGpu(d) || !p) return kInvalidArgument;
  unsigned n = static_cast<unsigned>(p->starts.size());
  if (!out) {
    *count = n;
    return kSuccess;
  }
  if (*count < n) return kInsufficientSize;
  for (unsigned i = 0; i < n; ++i) out[i] = {p->starts[i], p->memory_slices};
  *count = n;
  return kSuccess;
}
Return nvmlDeviceCreateGpuInstanceWithPlacement(Device d, unsigned id, const Placement* where, GpuInstance* gi) {
  std::lock_guard<std::mutex> lock(mu);
  Gpu* g = AsGpu(d);
  const Profile* p = ProfileById(id);
  if (!g || !p || !g->mig || where->size != p->memory_slices) return kInvalidArgument;
  for (auto& i : g->instances) {
    if (where->start < i->start + i->size && i->start < where->start + where->size) return kInsufficientSize;
  }
  auto inst = std::make_unique<Instance>();
  inst->parent = g;
  inst->id = g->next_gi++;
  inst->profile_index = p->index;
  inst->start = where->start;
  inst->size = where->size;
  inst->uuid = "MIG-stub-" + std::to_string(inst->id);
  *gi = inst.get();
  g->instances.push_back(std::move(inst));
  ++creates;
  return kSuccess;
}
Return nvmlGpuInstanceGetComputeInstanceProfileInfo(GpuInstance gi, unsigned index, unsigned,
                                                    ComputeInstanceProfileInfo* info) {
  static const unsigned slices[] = {1, 2, 3, 4, 7, 8, 6};
  Instance* i = AsInstance(gi);
  if (!i) return kInvalidArgument;
  if (index >= 7) return kInvalidArgument;
  unsigned gi_slices = 0;
  for (const Profile& p : Profiles()) {
    if (p.index == i->profile_index) gi_slices = p.slices;
  }
  if (slices[index] > gi_slices) return kNotSupported;
  std::memset(info, 0, sizeof(*info));
  info->id = index;
  info->slice_count = slices[index];
  return kSuccess;
}
Return nvmlGpuInstanceCreateComputeInstance(GpuInstance gi, unsigned, ComputeInstance* ci) {
  std::lock_guard<std::mutex> lock(mu);
  Instance* i = AsInstance(gi);
  if (!i || i->has_ci) return kInvalidArgument;
  i->has_ci = true;
  *ci = &i->ci_tag;
  return kSuccess;
}
Return nvmlGpuInstanceGetComputeInstanceById(GpuInstance gi, unsigned id, ComputeInstance* ci) {
  Instance* i = AsInstance(gi);
  if (!i || !i->has_ci || id != 0) return kNotFound;
  *ci = &i->ci_tag;
  return kSuccess;
}
Return nvmlComputeInstanceDestroy(ComputeInstance ci) {
  std::lock_guard<std::mutex> lock(mu);
  for (Gpu& g : gpus) {
    for (auto& i : g.instances) {
      if (&i->ci_tag != ci) continue;
      for (const Proc& p : g.procs) {
        if (p.gi == i->id) return kInUse;
      }
      i->has_ci = false;
      return kSuccess;
    }
  }
  return kInvalidArgument;
}
Return nvmlGpuInstanceDestroy(GpuInstance gi) {
  std::lock_guard<std::mutex> lock(mu);
  Instance* i = AsInstance(gi);
  if (!i) return kInvalidArgument;
  if (i->has_ci) return kInUse;
  auto& list = i->parent->instances;
  for (size_t k = 0; k < list.size(); ++k) {
    if (list[k].get() == i) {
      list.erase(list.begin() + static_cast<long>(k));
      ++destroys;
      return kSuccess;
    }
  }
  return kInvalidArgument;
}

// Test controls.
void stub_nvml_reset() {  // back to the state a fresh load has
  std::lock_guard<std::mutex> lock(mu);
  set_up = false;
  events.clear();
  creates = destroys = 0;
  Setup();
}
void stub_nvml_set_process(unsigned gpu, unsigned pid, unsigned long long bytes, unsigned gi, unsigned sm) {
  std::lock_guard<std::mutex> lock(mu);
  Setup();
  gpus[gpu].procs.push_back({pid, bytes, gi, sm});
}
void stub_nvml_set_mps_client(unsigned gpu, unsigned pid, unsigned long long bytes, unsigned sm) {
  std::lock_guard<std::mutex> lock(mu);
  Setup();
  gpus[gpu].procs.push_back({pid, bytes, 0xFFFFFFFFu, sm, true});
}
void stub_nvml_clear_processes() {
  std::lock_guard<std::mutex> lock(mu);
  for (Gpu& g : gpus) g.procs.clear();
}
void stub_nvml_push_xid(unsigned gpu, unsigned long long xid) {
  std::lock_guard<std::mutex> lock(mu);
  events.push_back({&gpus[gpu], kEventXid, xid, 0xFFFFFFFFu, 0xFFFFFFFFu});
}
int stub_nvml_instance_changes() {
  std::lock_guard<std::mutex> lock(mu);
  return creates * 1000 + destroys;
}

}  // extern "C"
