// MIG through NVML: reading a GPU's MIG devices with their slots, and re-partitioning an
// idle GPU (destroy unused instances, create new ones at the slots the scheduler chose).
// Changing instances needs root; the card's MIG mode itself is never changed.
#include <fmt/format.h>

#include <algorithm>

#include "agent/nvml_api.h"

namespace gantry::nvml {

namespace {

constexpr unsigned kProfileIndexLimit = 32;  // NVML_GPU_INSTANCE_PROFILE_COUNT is below this
constexpr unsigned kComputeProfileIndexLimit = 16;

// "MIG 3g.40gb" -> "3g.40gb"
std::string ProfileName(const char* nvml_name) {
  std::string n = nvml_name;
  size_t at = n.find("MIG ");
  return at == std::string::npos ? n : n.substr(at + 4);
}

Status Failed(const Api& api, const std::string& what, Return rc) {
  return Status::Internal(fmt::format("{}: {}", what, api.Error(rc)));
}

struct Profile {
  GpuInstanceProfileInfoV2 info{};
};

Expected<Profile> FindProfile(const Api& api, Device parent, const std::string& name) {
  std::vector<std::string> known;
  for (unsigned index = 0; index < kProfileIndexLimit; ++index) {
    Profile p;
    p.info.version = kGpuInstanceProfileInfoV2;
    if (api.gi_profile_info(parent, index, &p.info) != kSuccess) continue;
    std::string found = ProfileName(p.info.name);
    if (found == name) return p;
    known.push_back(found);
  }
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  return Status::NotFound(fmt::format("the GPU has no MIG profile {} (it has: {})", name, list));
}

// Destroys the compute instances and the GPU instance of one MIG device.
Status DestroyDevice(const Api& api, Device parent, const MigDeviceInfo& m) {
  GpuInstance gi = nullptr;
  Return rc = api.gi_by_id(parent, static_cast<unsigned>(m.gpu_instance), &gi);
  if (rc != kSuccess) return Failed(api, fmt::format("GPU instance {}", m.gpu_instance), rc);
  if (m.compute_instance >= 0) {
    ComputeInstance ci = nullptr;
    rc = api.ci_by_id(gi, static_cast<unsigned>(m.compute_instance), &ci);
    if (rc == kSuccess) rc = api.ci_destroy(ci);
    if (rc != kSuccess && rc != kNotFound) {
      return Failed(api, fmt::format("destroy compute instance {}/{}", m.gpu_instance, m.compute_instance), rc);
    }
  }
  rc = api.gi_destroy(gi);
  if (rc != kSuccess) return Failed(api, fmt::format("destroy GPU instance {} ({})", m.gpu_instance, m.profile), rc);
  return Status::Ok();
}

// One GPU instance of `spec` at its slot, with one compute instance over all of it.
Status CreateDevice(const Api& api, Device parent, const MigInstanceSpec& spec) {
  auto profile = FindProfile(api, parent, spec.profile);
  if (!profile) return profile.status();
  unsigned count = 0;
  api.gi_placements(parent, profile->info.id, nullptr, &count);
  std::vector<Placement> placements(count + 8);
  count = static_cast<unsigned>(placements.size());
  Return rc = api.gi_placements(parent, profile->info.id, placements.data(), &count);
  if (rc != kSuccess) return Failed(api, "possible placements of " + spec.profile, rc);
  placements.resize(count);
  auto at = std::find_if(placements.begin(), placements.end(),
                         [&](const Placement& p) { return p.start == static_cast<unsigned>(spec.start); });
  if (at == placements.end()) {
    return Status::Internal(fmt::format("{} cannot start at slice {} on this GPU", spec.profile, spec.start));
  }
  GpuInstance gi = nullptr;
  rc = api.gi_create(parent, profile->info.id, &*at, &gi);
  if (rc != kSuccess) return Failed(api, fmt::format("create {} at slice {}", spec.profile, spec.start), rc);
  for (unsigned index = 0; index < kComputeProfileIndexLimit; ++index) {
    ComputeInstanceProfileInfo ci_profile{};
    if (api.ci_profile_info(gi, index, kComputeEngineShared, &ci_profile) != kSuccess) continue;
    if (ci_profile.slice_count != profile->info.slice_count) continue;
    ComputeInstance ci = nullptr;
    rc = api.ci_create(gi, ci_profile.id, &ci);
    if (rc == kSuccess) return Status::Ok();
    break;
  }
  api.gi_destroy(gi);  // leave no half-made instance behind
  return rc != kSuccess ? Failed(api, "create compute instance in " + spec.profile, rc)
                        : Status::Internal("no compute profile spans " + spec.profile);
}

}  // namespace

std::vector<MigDeviceInfo> MigDevices(const Api& api, Device parent) {
  std::vector<MigDeviceInfo> out;
  unsigned max = 0;
  if (!api.max_mig || !api.mig_handle || api.max_mig(parent, &max) != kSuccess) return out;
  for (unsigned i = 0; i < max; ++i) {
    Device mig = nullptr;
    if (api.mig_handle(parent, i, &mig) != kSuccess) continue;
    MigDeviceInfo m;
    m.uuid = api.Uuid(mig);
    char name[96] = {};
    if (api.name && api.name(mig, name, sizeof(name)) == kSuccess) m.profile = ProfileName(name);
    unsigned id = 0;
    if (api.gi_id && api.gi_id(mig, &id) == kSuccess) m.gpu_instance = static_cast<int>(id);
    if (api.ci_id && api.ci_id(mig, &id) == kSuccess) m.compute_instance = static_cast<int>(id);
    GpuInstance gi = nullptr;
    GpuInstanceInfo info{};
    if (m.gpu_instance >= 0 && api.gi_by_id && api.gi_info &&
        api.gi_by_id(parent, static_cast<unsigned>(m.gpu_instance), &gi) == kSuccess &&
        api.gi_info(gi, &info) == kSuccess) {
      m.start = static_cast<int>(info.placement.start);
    }
    out.push_back(std::move(m));
  }
  return out;
}

Expected<std::vector<MigDeviceInfo>> ApplyMig(const Api& api, Device parent,
                                              const std::vector<MigInstanceSpec>& destroy,
                                              const std::vector<MigInstanceSpec>& create) {
  if (!api.gi_by_id || !api.gi_destroy || !api.ci_destroy || !api.ci_by_id || !api.gi_profile_info ||
      !api.gi_placements || !api.gi_create || !api.ci_profile_info || !api.ci_create) {
    return Status::Internal("this NVML cannot create or destroy MIG instances");
  }
  std::vector<MigDeviceInfo> now = MigDevices(api, parent);
  std::vector<const MigDeviceInfo*> doomed;
  for (const MigInstanceSpec& d : destroy) {
    auto it = std::find_if(now.begin(), now.end(),
                           [&](const MigDeviceInfo& m) { return m.profile == d.profile && m.start == d.start; });
    if (it == now.end()) continue;  // already gone
    doomed.push_back(&*it);
  }
  if (!doomed.empty()) {
    // Whole-GPU process lists under MIG need the privileges that changing instances needs.
    unsigned n = 64;
    std::vector<ProcessInfo> procs(n);
    Return rc = api.processes ? api.processes(parent, &n, procs.data()) : kNotSupported;
    if (rc != kSuccess) return Failed(api, "cannot list the GPU's processes before destroying instances", rc);
    for (unsigned i = 0; i < n; ++i) {
      for (const MigDeviceInfo* m : doomed) {
        if (procs[i].gpu_instance_id == static_cast<unsigned>(m->gpu_instance)) {
          return Status::Internal(fmt::format("process {} runs in the {} instance at slice {}: not touching it",
                                              procs[i].pid, m->profile, m->start));
        }
      }
    }
  }
  for (const MigDeviceInfo* m : doomed) {
    if (Status s = DestroyDevice(api, parent, *m); !s.ok()) return s;
  }
  for (const MigInstanceSpec& c : create) {
    bool made = std::any_of(now.begin(), now.end(),
                            [&](const MigDeviceInfo& m) { return m.profile == c.profile && m.start == c.start; });
    if (made) continue;  // by an earlier try of the same order
    if (Status s = CreateDevice(api, parent, c); !s.ok()) return s;
  }
  return MigDevices(api, parent);
}

}  // namespace gantry::nvml
