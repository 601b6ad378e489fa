// Fake GPUs.
#include "agent/fake_provider.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

namespace gantry {

FakeGpuProvider::FakeGpuProvider(GpuInventory inventory) : inventory_(std::move(inventory)) {
  inventory_.provider = "fake";
  if (inventory_.driver_version.empty()) inventory_.driver_version = "fake";
  for (const GpuInfo& g : inventory_.gpus) state_[g.uuid] = State{};
}

Expected<GpuInventory> FakeGpuProvider::Inventory() {
  std::lock_guard<std::mutex> lock(mu_);
  return inventory_;
}

Expected<std::vector<MigDeviceInfo>> FakeGpuProvider::ApplyMig(const std::string& gpu_uuid,
                                                               const std::vector<MigInstanceSpec>& destroy,
                                                               const std::vector<MigInstanceSpec>& create) {
  std::lock_guard<std::mutex> lock(mu_);
  auto gpu = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                          [&](const GpuInfo& g) { return g.uuid == gpu_uuid; });
  if (gpu == inventory_.gpus.end()) return Status::NotFound("no GPU " + gpu_uuid + " on this node");
  if (!gpu->mig_enabled) return Status::Internal(gpu_uuid + " is not in MIG mode");
  const State& st = state_[gpu_uuid];
  if (!destroy.empty() && !st.processes.empty()) {
    return Status::Internal(
        fmt::format("process {} runs on the GPU: not destroying its instances", st.processes.front().first));
  }
  std::vector<MigDeviceInfo>& devices = gpu->mig_devices;
  std::erase_if(devices, [&](const MigDeviceInfo& m) {
    return std::find(destroy.begin(), destroy.end(), MigInstanceSpec{m.profile, m.start}) != destroy.end();
  });
  for (const MigInstanceSpec& c : create) {
    auto at = std::find_if(devices.begin(), devices.end(), [&](const MigDeviceInfo& m) { return m.start == c.start; });
    if (at != devices.end() && at->profile == c.profile) continue;  // made by an earlier try of this order
    if (at != devices.end()) return Status::Internal(fmt::format("slice {} already holds a {}", c.start, at->profile));
    int gi = ++mig_instances_made_;
    devices.push_back({fmt::format("MIG-fake-{}-{}", gpu_uuid, gi), c.profile, gi, 0, c.start});
  }
  ++mig_changes_;
  return devices;
}

int FakeGpuProvider::mig_changes() {
  std::lock_guard<std::mutex> lock(mu_);
  return mig_changes_;
}

Expected<std::vector<GpuSample>> FakeGpuProvider::Sample() {
  std::lock_guard<std::mutex> lock(mu_);
  ++samples_;
  std::vector<GpuSample> out;
  for (const GpuInfo& g : inventory_.gpus) {
    const State& st = state_[g.uuid];
    GpuSample s;
    s.uuid = g.uuid;
    s.lost = st.lost;
    s.last_xid = st.last_xid;
    s.xid_events = st.xid_events;
    if (st.lost) {
      out.push_back(std::move(s));
      continue;
    }
    // A busy GPU runs at 70-95% of its share, moving a little from sample to sample.
    double wobble = 0.5 + 0.5 * std::sin(static_cast<double>(samples_) * 0.7 + static_cast<double>(g.index));
    s.util_pct = st.share > 0 ? std::min(100.0, st.share * (70 + 25 * wobble)) : 0;
    s.mem_util_pct = s.util_pct * 0.4;
    s.mem_total_mib = g.memory_total_mib;
    s.mem_used_mib = std::min(g.memory_total_mib, st.memory_mib);
    s.temperature_c = st.temperature_override >= 0 ? st.temperature_override : 32 + s.util_pct * 0.45;
    s.power_limit_w = 400;
    s.power_w = 60 + s.util_pct * 3.2;
    s.sm_clock_mhz = st.share > 0 ? 1410 : 210;
    s.ecc_corrected = 0;
    s.ecc_uncorrected = st.ecc_uncorrected;
    s.retired_pages = 0;
    s.remap_pending = 0;
    for (const auto& [pid, memory] : st.processes)
      s.processes.push_back({pid, memory, static_cast<int>(s.util_pct), -1, ""});
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<GpuEvent> FakeGpuProvider::Events(int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!events_.empty()) {
        std::vector<GpuEvent> out(events_.begin(), events_.end());
        events_.clear();
        return out;
      }
    }
    if (std::chrono::steady_clock::now() >= until) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void FakeGpuProvider::SetLoad(const std::string& uuid, double share, int64_t memory_mib,
                              std::vector<std::pair<int, int64_t>> processes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = state_.find(uuid);
  if (it == state_.end()) return;
  it->second.share = share;
  it->second.memory_mib = memory_mib;
  it->second.processes = std::move(processes);
}

bool FakeGpuProvider::InjectXid(const std::string& uuid, int xid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = state_.find(uuid);
  if (it == state_.end()) return false;
  it->second.last_xid = xid;
  it->second.xid_events++;
  if (xid == 79) it->second.lost = true;
  events_.push_back({uuid, xid, fmt::format("XID {}", xid)});
  return true;
}

bool FakeGpuProvider::SetTemperature(const std::string& uuid, double celsius) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = state_.find(uuid);
  if (it == state_.end()) return false;
  it->second.temperature_override = celsius;
  return true;
}

bool FakeGpuProvider::AddUncorrectableEcc(const std::string& uuid, int64_t errors) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = state_.find(uuid);
  if (it == state_.end()) return false;
  it->second.ecc_uncorrected += errors;
  return true;
}

bool FakeGpuProvider::Heal(const std::string& uuid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = state_.find(uuid);
  if (it == state_.end()) return false;
  State fresh;
  fresh.share = it->second.share;
  fresh.memory_mib = it->second.memory_mib;
  fresh.processes = it->second.processes;
  it->second = fresh;
  return true;
}

}  // namespace gantry
