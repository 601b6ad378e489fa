// The NVML provider: inventory (with NVLink peers and MIG devices), readings, per-process
// memory and SM use, and XID events, through the entry points of nvml_api.h.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "agent/nvml_api.h"

namespace gantry {

namespace nvml {

bool Api::Open(const char* path) {
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  Load(init, "nvmlInit_v2");
  Load(shutdown, "nvmlShutdown");
  Load(error_string, "nvmlErrorString");
  Load(driver_version, "nvmlSystemGetDriverVersion");
  Load(count, "nvmlDeviceGetCount_v2");
  Load(handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  Load(uuid, "nvmlDeviceGetUUID");
  Load(name, "nvmlDeviceGetName");
  Load(pci, "nvmlDeviceGetPciInfo_v3");
  Load(memory, "nvmlDeviceGetMemoryInfo");
  Load(utilization, "nvmlDeviceGetUtilizationRates");
  Load(temperature, "nvmlDeviceGetTemperature");
  Load(power, "nvmlDeviceGetPowerUsage");
  Load(power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  Load(clock, "nvmlDeviceGetClockInfo");
  Load(ecc, "nvmlDeviceGetTotalEccErrors");
  Load(retired_pages, "nvmlDeviceGetRetiredPages");
  Load(remapped_rows, "nvmlDeviceGetRemappedRows");
  Load(processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  Load(mps_processes, "nvmlDeviceGetMPSComputeRunningProcesses_v3");
  Load(process_utilization, "nvmlDeviceGetProcessUtilization");
  Load(event_set_create, "nvmlEventSetCreate");
  Load(supported_events, "nvmlDeviceGetSupportedEventTypes");
  Load(register_events, "nvmlDeviceRegisterEvents");
  Load(event_wait, "nvmlEventSetWait_v2");
  Load(event_set_free, "nvmlEventSetFree");
  Load(nvlink_state, "nvmlDeviceGetNvLinkState");
  Load(nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  Load(nvlink_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
  Load(mig_mode, "nvmlDeviceGetMigMode");
  Load(max_mig, "nvmlDeviceGetMaxMigDeviceCount");
  Load(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
  Load(gi_id, "nvmlDeviceGetGpuInstanceId");
  Load(ci_id, "nvmlDeviceGetComputeInstanceId");
  Load(gi_by_id, "nvmlDeviceGetGpuInstanceById");
  Load(gi_info, "nvmlGpuInstanceGetInfo");
  Load(gi_profile_info, "nvmlDeviceGetGpuInstanceProfileInfoV");
  Load(gi_placements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  Load(gi_create, "nvmlDeviceCreateGpuInstanceWithPlacement");
  Load(gi_destroy, "nvmlGpuInstanceDestroy");
  Load(ci_profile_info, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  Load(ci_create, "nvmlGpuInstanceCreateComputeInstance");
  Load(ci_by_id, "nvmlGpuInstanceGetComputeInstanceById");
  Load(ci_destroy, "nvmlComputeInstanceDestroy");
  return true;
}

std::string Api::Error(Return rc) const {
  return error_string ? fmt::format("{} ({})", error_string(rc), rc) : fmt::format("NVML error {}", rc);
}

std::string Api::Uuid(Device d) const {
  char buf[96] = {};
  return uuid(d, buf, sizeof(buf)) == kSuccess ? std::string(buf) : std::string();
}

}  // namespace nvml

namespace {

using nvml::kSuccess;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class NvmlProvider : public GpuProvider {
 public:
  ~NvmlProvider() override {
    if (events_ && api_.event_set_free) api_.event_set_free(events_);
    if (api_.shutdown) api_.shutdown();
    if (api_.lib) dlclose(api_.lib);
  }

  bool Open(const std::string& library, std::string* why) {
    if (!api_.Open(library.c_str())) {
      *why = "cannot load " + library + ": " + dlerror();
      return false;
    }
    if (!api_.init || !api_.count || !api_.handle_by_index || !api_.uuid) {
      *why = library + " lacks nvmlInit_v2 or the device calls";
      return false;
    }
    if (nvml::Return rc = api_.init(); rc != kSuccess) {
      *why = "nvmlInit_v2: " + api_.Error(rc);
      api_.shutdown = nullptr;  // nothing to pair
      return false;
    }
    unsigned n = 0;
    if (nvml::Return rc = api_.count(&n); rc != kSuccess) {
      *why = "nvmlDeviceGetCount_v2: " + api_.Error(rc);
      return false;
    }
    for (unsigned i = 0; i < n; ++i) {
      nvml::Device d = nullptr;
      if (api_.handle_by_index(i, &d) == kSuccess) devices_.push_back({static_cast<int>(i), d, api_.Uuid(d)});
    }
    if (devices_.empty()) {
      *why = "NVML sees no GPU it can open";
      return false;
    }
    RegisterEvents();
    return true;
  }

  std::string name() const override { return "nvml"; }
  bool DeliversXidEvents() const override { return events_ != nullptr; }

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
      nvml::PciInfo pci{};
      if (api_.pci && api_.pci(dev.handle, &pci) == kSuccess) g.pci_bus_id = pci.bus_id;
      nvml::Memory mem{};
      if (api_.memory && api_.memory(dev.handle, &mem) == kSuccess) {
        g.memory_total_mib = static_cast<int64_t>(mem.total >> 20);
      }
      unsigned current = 0, pending = 0;
      if (api_.mig_mode && api_.mig_mode(dev.handle, &current, &pending) == kSuccess) g.mig_enabled = current == 1;
      if (g.mig_enabled) g.mig_devices = nvml::MigDevices(api_, dev.handle);
      inv.gpus.push_back(std::move(g));
    }
    AddNvLinkPeers(inv);
    return inv;
  }

  Expected<std::vector<GpuSample>> Sample() override {
    std::vector<GpuSample> out;
    for (Device& dev : devices_) {
      GpuSample s;
      s.uuid = dev.uuid;
      nvml::Memory mem{};
      nvml::Return rc = api_.memory ? api_.memory(dev.handle, &mem) : -1;
      if (rc == nvml::kGpuIsLost) {
        s.lost = true;
        out.push_back(s);
        continue;
      }
      if (rc == kSuccess) {
        s.mem_used_mib = static_cast<int64_t>(mem.used >> 20);
        s.mem_total_mib = static_cast<int64_t>(mem.total >> 20);
      }
      nvml::Utilization u{};
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
      s.processes = Processes(dev);
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = last_xid_.find(dev.uuid);
        if (it != last_xid_.end()) s.last_xid = it->second;
        s.xid_events = xid_events_[dev.uuid];
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  std::vector<GpuEvent> Events(int timeout_ms) override {
    std::vector<GpuEvent> out;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
    if (!events_ || !api_.event_wait) {
      std::this_thread::sleep_until(until);  // no events to wait for: the caller still paces on us
      return out;
    }
    nvml::EventData data{};
    unsigned wait = static_cast<unsigned>(std::max(0, timeout_ms));
    while (api_.event_wait(events_, &data, wait) == kSuccess) {
      GpuEvent e;
      for (const Device& dev : devices_) {
        if (dev.handle == data.device) e.uuid = dev.uuid;
      }
      if (data.event_type & nvml::kEventXid) {
        e.xid = static_cast<int>(data.event_data);
        e.what = fmt::format("XID {}", e.xid);
        std::lock_guard<std::mutex> lock(mu_);
        last_xid_[e.uuid] = e.xid;
        xid_events_[e.uuid]++;
      } else if (data.event_type & nvml::kEventDoubleBitEcc) {
        e.what = "double-bit ECC error";
      } else {
        e.what = fmt::format("NVML event 0x{:x}", data.event_type);
      }
      out.push_back(std::move(e));
      wait = 0;  // drain what is queued, do not wait again
      data = nvml::EventData{};
    }
    if (out.empty()) std::this_thread::sleep_until(until);  // NVML may return early
    return out;
  }

  Expected<std::vector<MigDeviceInfo>> ApplyMig(const std::string& gpu_uuid,
                                                const std::vector<MigInstanceSpec>& destroy,
                                                const std::vector<MigInstanceSpec>& create) override {
    for (Device& dev : devices_) {
      if (dev.uuid == gpu_uuid) return nvml::ApplyMig(api_, dev.handle, destroy, create);
    }
    return Status::NotFound("no GPU " + gpu_uuid + " on this node");
  }

 private:
  struct Device {
    int index;
    nvml::Device handle;
    std::string uuid;
    unsigned long long last_process_sample_us = 0;
  };

  // Peers over NVLink: a link whose far end is another GPU of this node names it; GPUs
  // that reach an NVSwitch are all peers of each other.
  void AddNvLinkPeers(GpuInventory& inv) const {
    if (!api_.nvlink_state) return;
    std::map<std::string, int> by_bus;
    for (const GpuInfo& g : inv.gpus) by_bus[Lower(g.pci_bus_id)] = g.index;
    std::vector<int> on_switch;
    for (size_t i = 0; i < devices_.size(); ++i) {
      std::set<int> peers;
      bool switched = false;
      for (unsigned link = 0; link < nvml::kMaxNvLinks; ++link) {
        int active = 0;
        if (api_.nvlink_state(devices_[i].handle, link, &active) != kSuccess || active != 1) continue;
        int type = -1;
        if (api_.nvlink_remote_type && api_.nvlink_remote_type(devices_[i].handle, link, &type) == kSuccess &&
            type == nvml::kNvLinkRemoteSwitch) {
          switched = true;
          continue;
        }
        nvml::PciInfo pci{};
        if (!api_.nvlink_remote_pci || api_.nvlink_remote_pci(devices_[i].handle, link, &pci) != kSuccess) continue;
        auto it = by_bus.find(Lower(pci.bus_id));
        if (it != by_bus.end() && it->second != inv.gpus[i].index) peers.insert(it->second);
      }
      if (switched) on_switch.push_back(static_cast<int>(i));
      inv.gpus[i].nvlink_peers.assign(peers.begin(), peers.end());
    }
    for (int i : on_switch) {
      std::set<int> peers(inv.gpus[i].nvlink_peers.begin(), inv.gpus[i].nvlink_peers.end());
      for (int j : on_switch) {
        if (j != i) peers.insert(inv.gpus[j].index);
      }
      inv.gpus[i].nvlink_peers.assign(peers.begin(), peers.end());
    }
  }

  // Appends the processes one NVML list call gives (skipping pids already there).
  using ListCall = nvml::Return (*)(nvml::Device, unsigned*, nvml::ProcessInfo*);
  static void ListProcesses(ListCall list, nvml::Device handle, std::vector<GpuProcess>& out) {
    if (!list) return;
    unsigned n = 0;
    nvml::Return rc = list(handle, &n, nullptr);
    if (rc != kSuccess && rc != nvml::kInsufficientSize) return;
    std::vector<nvml::ProcessInfo> infos(n + 8);
    n = static_cast<unsigned>(infos.size());
    if (list(handle, &n, infos.data()) != kSuccess) return;
    for (unsigned i = 0; i < n; ++i) {
      int pid = static_cast<int>(infos[i].pid);
      if (std::any_of(out.begin(), out.end(), [&](const GpuProcess& p) { return p.pid == pid; })) continue;
      GpuProcess p{pid, static_cast<int64_t>(infos[i].used_gpu_memory >> 20), -1, -1, ""};
      if (infos[i].gpu_instance_id != 0xFFFFFFFFu) p.gpu_instance = static_cast<int>(infos[i].gpu_instance_id);
      out.push_back(p);
    }
  }

  // The compute processes on a GPU with their memory (MPS clients too: NVML lists their
  // server among the compute processes and the clients apart), and their SM use since the
  // last reading where the GPU reports it (not under MIG).
  std::vector<GpuProcess> Processes(Device& dev) const {
    std::vector<GpuProcess> out;
    ListProcesses(api_.processes, dev.handle, out);
    ListProcesses(api_.mps_processes, dev.handle, out);
    if (out.empty() || !api_.process_utilization) return out;
    unsigned samples = 0;
    nvml::Return rc = api_.process_utilization(dev.handle, nullptr, &samples, dev.last_process_sample_us);
    if (rc != nvml::kInsufficientSize && rc != kSuccess) return out;
    std::vector<nvml::ProcessUtilizationSample> util(samples + 8);
    samples = static_cast<unsigned>(util.size());
    if (api_.process_utilization(dev.handle, util.data(), &samples, dev.last_process_sample_us) != kSuccess) {
      return out;
    }
    for (unsigned i = 0; i < samples; ++i) {
      dev.last_process_sample_us = std::max(dev.last_process_sample_us, util[i].time_stamp);
      for (GpuProcess& p : out) {
        if (p.pid == static_cast<int>(util[i].pid)) p.sm_util = std::max(p.sm_util, static_cast<int>(util[i].sm_util));
      }
    }
    return out;
  }

  void RegisterEvents() {
    if (!api_.event_set_create || !api_.register_events || api_.event_set_create(&events_) != kSuccess) return;
    for (const Device& dev : devices_) {
      unsigned long long supported = 0;
      if (api_.supported_events && api_.supported_events(dev.handle, &supported) != kSuccess) continue;
      unsigned long long wanted = supported & (nvml::kEventXid | nvml::kEventDoubleBitEcc);
      if (wanted) api_.register_events(dev.handle, wanted, events_);
    }
  }

  nvml::Api api_;
  std::vector<Device> devices_;
  nvml::EventSet events_ = nullptr;
  std::mutex mu_;
  std::map<std::string, int> last_xid_;
  std::map<std::string, int64_t> xid_events_;  // XID events per GPU since the provider opened
};

}  // namespace

std::unique_ptr<GpuProvider> OpenNvmlProvider(std::string* why, std::string library) {
  if (library.empty()) {
    const char* env = std::getenv("GANTRY_NVML_LIBRARY");
    library = env && *env ? env : "libnvidia-ml.so.1";
  }
  auto p = std::make_unique<NvmlProvider>();
  if (!p->Open(library, why)) return nullptr;
  return p;
}

}  // namespace gantry
