// PodWatch: a WatchLoop over /api/v1/pods with a field selector on the scheduler's name.
#include "kube/pod_watch.h"

#include <algorithm>

#include "core/encoding.h"

namespace gantry {

PodWatch::PodWatch(const KubeConfig& config, KubePodPolicy policy, Apply apply, ApplyAll apply_all)
    : policy_(std::move(policy)),
      groups_(config),
      apply_(std::move(apply)),
      apply_all_(std::move(apply_all)),
      loop_(config, "/api/v1/pods", "fieldSelector=" + UrlEncode("spec.schedulerName=" + policy_.scheduler_name),
            {[this](const std::vector<nlohmann::json>& items) {
               std::vector<WatchedPod> all;
               for (const nlohmann::json& pod : items) {
                 if (WantsGantry(pod, policy_)) all.push_back(Read(pod));
               }
               apply_all_(all);
             },
             [this](const std::string& type, const nlohmann::json& pod) {
               if (!WantsGantry(pod, policy_)) return;
               WatchedPod read = Read(pod);
               read.deleted = type == "DELETED";  // one being deleted still runs: its job says so
               apply_(read);
             }}) {}

WatchedPod PodWatch::Read(const nlohmann::json& pod) {
  const nlohmann::json& meta = ObjectAt(pod, "metadata");
  const std::string ns = StringAt(meta, "namespace"), name = StringAt(meta, "name");
  WatchedPod read{ns + "/" + name, ns, name, StringAt(meta, "uid"), JobOfPod(pod, policy_), false};
  if (read.job.ok() && !read.job->gang.empty() && read.job->gang_min_members == 0 &&
      StringAt(ObjectAt(meta, "labels"), "scheduling.x-k8s.io/pod-group") == read.job->gang) {
    read.job->gang_min_members = PodGroupMinMember(ns, read.job->gang);
  }
  return read;
}

int PodWatch::PodGroupMinMember(const std::string& ns, const std::string& name) {
  const auto now = std::chrono::steady_clock::now();
  auto it = groups_read_.find(ns + "/" + name);
  if (it != groups_read_.end() && (it->second.min_member > 0 || now - it->second.read < std::chrono::seconds(10))) {
    return it->second.min_member;
  }
  auto r =
      groups_.Get("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/" + UrlEncode(ns) + "/podgroups/" + UrlEncode(name));
  int64_t min = r.ok() && r->ok() ? IntAt(ObjectAt(r->body, "spec"), "minMember") : 0;
  int members = static_cast<int>(std::clamp<int64_t>(min, 0, kMaxNodesPerJob));
  groups_read_[ns + "/" + name] = {members, now};
  return members;
}

}  // namespace gantry
