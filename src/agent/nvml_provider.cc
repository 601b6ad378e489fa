// The NVML provider: libnvidia-ml.so.1 loaded with dlopen, the versioned symbols looked up
// by hand (dlsym does not apply the header's _v2/_v3 macros), structs laid out as the
// header has them on x86_64 (sizes checked below). A missing symbol means "not supported".
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <mutex>

#include "agent/gpu_provider.h"

namespace gantry {

namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
using nvmlEventSet_t = void*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kGpuIsLost = 15;
constexpr unsigned long long kEventXid = 0x8;
constexpr unsigned long long kEventDoubleBitEcc = 0x2;

struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned gpu, memory;
};
struct NvmlProcessInfo {
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id;
};
struct NvmlEventData {
  nvmlDevice_t device;
  unsigned long long event_type, event_data;
  unsigned gpu_instance_id, compute_instance_id;
};
static_assert(sizeof(NvmlPciInfo) == 68);
static_assert(sizeof(NvmlMemory) == 24);
static_assert(sizeof(NvmlUtilization) == 8);
static_assert(sizeof(NvmlProcessInfo) == 24);
static_assert(sizeof(NvmlEventData) == 32);

struct NvmlApi {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, NvmlUtilization*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*retired_pages)(nvmlDevice_t, int, unsigned*, unsigned long long*) = nullptr;
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, NvmlProcessInfo*) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*max_mig)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*mig_handle)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*gi_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*ci_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*supported_events)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_wait)(nvmlEventSet_t, NvmlEventData*, unsigned) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;

  template <typename F>
  void Load(F*& fn, const char* symbol) {
    fn = reinterpret_cast<F*>(dlsym(lib, symbol));
  }
};

class NvmlProvider : public GpuProvider {
 public:
  ~NvmlProvider() override {
    if (events_ && api_.event_set_free) api_.event_set_free(events_);
    if (api_.shutdown) api_.shutdown();
    if (api_.lib) dlclose(api_.lib);
  }

  bool Open(std::string* why) {
    api_.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!api_.lib) {
      *why = std::string("cannot load libnvidia-ml.so.1: ") + dlerror();
      return false;
    }
    api_.Load(api_.init, "nvmlInit_v2");
    api_.Load(api_.shutdown, "nvmlShutdown");
    api_.Load(api_.error_string, "nvmlErrorString");
    api_.Load(api_.driver_version, "nvmlSystemGetDriverVersion");
    api_.Load(api_.count, "nvmlDeviceGetCount_v2");
    api_.Load(api_.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
    api_.Load(api_.uuid, "nvmlDeviceGetUUID");
    api_.Load(api_.name, "nvmlDeviceGetName");
    api_.Load(api_.pci, "nvmlDeviceGetPciInfo_v3");
    api_.Load(api_.memory, "nvmlDeviceGetMemoryInfo");
    api_.Load(api_.utilization, "nvmlDeviceGetUtilizationRates");
    api_.Load(api_.temperature, "nvmlDeviceGetTemperature");
    api_.Load(api_.power, "nvmlDeviceGetPowerUsage");
    api_.Load(api_.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    api_.Load(api_.clock, "nvmlDeviceGetClockInfo");
    api_.Load(api_.ecc, "nvmlDeviceGetTotalEccErrors");
    api_.Load(api_.retired_pages, "nvmlDeviceGetRetiredPages");
    api_.Load(api_.remapped_rows, "nvmlDeviceGetRemappedRows");
    api_.Load(api_.processes, "nvmlDeviceGetComputeRunningProcesses_v3");
    api_.Load(api_.mig_mode, "nvmlDeviceGetMigMode");
    api_.Load(api_.max_mig, "nvmlDeviceGetMaxMigDeviceCount");
    api_.Load(api_.mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
    api_.Load(api_.gi_id, "nvmlDeviceGetGpuInstanceId");
    api_.Load(api_.ci_id, "nvmlDeviceGetComputeInstanceId");
    api_.Load(api_.event_set_create, "nvmlEventSetCreate");
    api_.Load(api_.supported_events, "nvmlDeviceGetSupportedEventTypes");
    api_.Load(api_.register_events, "nvmlDeviceRegisterEvents");
    api_.Load(api_.event_wait, "nvmlEventSetWait_v2");
    api_.Load(api_.event_set_free, "nvmlEventSetFree");
    if (!api_.init || !api_.count || !api_.handle_by_index || !api_.uuid) {
      *why = "libnvidia-ml.so.1 lacks nvmlInit_v2 or the device calls";
      return false;
    }
    if (nvmlReturn_t rc = api_.init(); rc != kSuccess) {
      *why = "nvmlInit_v2: " + Error(rc);
      api_.shutdown = nullptr;  // nothing to pair
      return false;
    }
    unsigned n = 0;
    if (nvmlReturn_t rc = api_.count(&n); rc != kSuccess) {
      *why = "nvmlDeviceGetCount_v2: " + Error(rc);
      return false;
    }
    for (unsigned i = 0; i < n; ++i) {
      nvmlDevice_t d = nullptr;
      if (api_.handle_by_index(i, &d) == kSuccess) devices_.push_back({static_cast<int>(i), d, Uuid(d)});
    }
    if (devices_.empty()) {
      *why = "NVML sees no GPU it can open";
      return false;
    }
    RegisterEvents();
    return true;
  }

  std::string name() const override { return "nvml"; }

  Expected<GpuInventory> Inventory() override {
    GpuInventory inv;
    inv.provider = "nvml";
    char version[96] = {};
    if (api_.driver_version && api_.driver_version(version, sizeof(version)) == kSuccess) inv.driver_version = version;
    for (const Device& dev : devices_) {
      GpuInfo g;
      g.index = dev.index;
      g.uuid = dev.uuid;
      char name[96] = {};
      if (api_.name && api_.name(dev.handle, name, sizeof(name)) == kSuccess) g.name = name;
      NvmlPciInfo pci{};
      if (api_.pci && api_.pci(dev.handle, &pci) == kSuccess) g.pci_bus_id = pci.bus_id;
      NvmlMemory mem{};
      if (api_.memory && api_.memory(dev.handle, &mem) == kSuccess) {
        g.memory_total_mib = static_cast<int64_t>(mem.total >> 20);
      }
      unsigned current = 0, pending = 0;
      if (api_.mig_mode && api_.mig_mode(dev.handle, &current, &pending) == kSuccess) g.mig_enabled = current == 1;
      if (g.mig_enabled) g.mig_devices = MigDevices(dev.handle);
      inv.gpus.push_back(std::move(g));
    }
    return inv;
  }

  Expected<std::vector<GpuSample>> Sample() override {
    std::vector<GpuSample> out;
    for (const Device& dev : devices_) {
      GpuSample s;
      s.uuid = dev.uuid;
      NvmlMemory mem{};
      nvmlReturn_t rc = api_.memory ? api_.memory(dev.handle, &mem) : -1;
      if (rc == kGpuIsLost) {
        s.lost = true;
        out.push_back(s);
        continue;
      }
      if (rc == kSuccess) {
        s.mem_used_mib = static_cast<int64_t>(mem.used >> 20);
        s.mem_total_mib = static_cast<int64_t>(mem.total >> 20);
      }
      NvmlUtilization u{};
      if (api_.utilization && api_.utilization(dev.handle, &u) == kSuccess) {
        s.util_pct = u.gpu;
        s.mem_util_pct = u.memory;
      }
      unsigned v = 0;
      if (api_.temperature && api_.temperature(dev.handle, 0, &v) == kSuccess) s.temperature_c = v;
      if (api_.power && api_.power(dev.handle, &v) == kSuccess) s.power_w = v / 1000.0;
      if (api_.power_limit && api_.power_limit(dev.handle, &v) == kSuccess) s.power_limit_w = v / 1000.0;
      if (api_.clock && api_.clock(dev.handle, 1, &v) == kSuccess) s.sm_clock_mhz = static_cast<int>(v);
      unsigned long long count = 0;
      if (api_.ecc && api_.ecc(dev.handle, 0, 0, &count) == kSuccess) s.ecc_corrected = static_cast<int64_t>(count);
      if (api_.ecc && api_.ecc(dev.handle, 1, 0, &count) == kSuccess) s.ecc_uncorrected = static_cast<int64_t>(count);
      unsigned pages = 0;
      if (api_.retired_pages && api_.retired_pages(dev.handle, 1, &pages, nullptr) == kSuccess) {
        s.retired_pages = pages;
      }
      unsigned corr = 0, unc = 0, pending = 0, failed = 0;
      if (api_.remapped_rows && api_.remapped_rows(dev.handle, &corr, &unc, &pending, &failed) == kSuccess) {
        s.remap_pending = pending ? 1 : 0;
      }
      s.processes = Processes(dev.handle);
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = last_xid_.find(dev.uuid);
        if (it != last_xid_.end()) s.last_xid = it->second;
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  std::vector<GpuEvent> Events(int timeout_ms) override {
    std::vector<GpuEvent> out;
    if (!events_ || !api_.event_wait) return out;
    NvmlEventData data{};
    unsigned wait = static_cast<unsigned>(std::max(0, timeout_ms));
    while (api_.event_wait(events_, &data, wait) == kSuccess) {
      GpuEvent e;
      for (const Device& dev : devices_) {
        if (dev.handle == data.device) e.uuid = dev.uuid;
      }
      if (data.event_type & kEventXid) {
        e.xid = static_cast<int>(data.event_data);
        e.what = fmt::format("XID {}", e.xid);
        std::lock_guard<std::mutex> lock(mu_);
        last_xid_[e.uuid] = e.xid;
      } else if (data.event_type & kEventDoubleBitEcc) {
        e.what = "double-bit ECC error";
      } else {
        e.what = fmt::format("NVML event 0x{:x}", data.event_type);
      }
      out.push_back(std::move(e));
      wait = 0;  // drain what is queued, do not wait again
      data = NvmlEventData{};
    }
    return out;
  }

 private:
  struct Device {
    int index;
    nvmlDevice_t handle;
    std::string uuid;
  };

  std::string Error(nvmlReturn_t rc) const {
    return api_.error_string ? fmt::format("{} ({})", api_.error_string(rc), rc) : fmt::format("error {}", rc);
  }

  std::string Uuid(nvmlDevice_t d) const {
    char buf[96] = {};
    return api_.uuid(d, buf, sizeof(buf)) == kSuccess ? std::string(buf) : std::string();
  }

  std::vector<MigDeviceInfo> MigDevices(nvmlDevice_t parent) const {
    std::vector<MigDeviceInfo> out;
    unsigned max = 0;
    if (!api_.max_mig || !api_.mig_handle || api_.max_mig(parent, &max) != kSuccess) return out;
    for (unsigned i = 0; i < max; ++i) {
      nvmlDevice_t mig = nullptr;
      if (api_.mig_handle(parent, i, &mig) != kSuccess) continue;
      MigDeviceInfo m;
      m.uuid = Uuid(mig);
      char name[96] = {};
      if (api_.name && api_.name(mig, name, sizeof(name)) == kSuccess) {
        std::string n = name;
        size_t at = n.find("MIG ");
        m.profile = at == std::string::npos ? n : n.substr(at + 4);
      }
      unsigned id = 0;
      if (api_.gi_id && api_.gi_id(mig, &id) == kSuccess) m.gpu_instance = static_cast<int>(id);
      if (api_.ci_id && api_.ci_id(mig, &id) == kSuccess) m.compute_instance = static_cast<int>(id);
      out.push_back(std::move(m));
    }
    return out;
  }

  std::vector<GpuProcess> Processes(nvmlDevice_t d) const {
    std::vector<GpuProcess> out;
    if (!api_.processes) return out;
    unsigned n = 0;
    nvmlReturn_t rc = api_.processes(d, &n, nullptr);
    if (rc != kSuccess && rc != kInsufficientSize) return out;
    std::vector<NvmlProcessInfo> infos(n + 8);
    n = static_cast<unsigned>(infos.size());
    if (api_.processes(d, &n, infos.data()) != kSuccess) return out;
    for (unsigned i = 0; i < n; ++i) {
      out.push_back({static_cast<int>(infos[i].pid), static_cast<int64_t>(infos[i].used_gpu_memory >> 20), -1, ""});
    }
    return out;
  }

  void RegisterEvents() {
    if (!api_.event_set_create || !api_.register_events || api_.event_set_create(&events_) != kSuccess) return;
    for (const Device& dev : devices_) {
      unsigned long long supported = 0;
      if (api_.supported_events && api_.supported_events(dev.handle, &supported) != kSuccess) continue;
      unsigned long long wanted = supported & (kEventXid | kEventDoubleBitEcc);
      if (wanted) api_.register_events(dev.handle, wanted, events_);
    }
  }

  NvmlApi api_;
  std::vector<Device> devices_;
  nvmlEventSet_t events_ = nullptr;
  std::mutex mu_;
  std::map<std::string, int> last_xid_;
};

}  // namespace

std::unique_ptr<GpuProvider> OpenNvmlProvider(std::string* why) {
  auto p = std::make_unique<NvmlProvider>();
  if (!p->Open(why)) return nullptr;
  return p;
}

}  // namespace gantry
