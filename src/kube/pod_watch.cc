// PodWatch: a WatchLoop over /api/v1/pods with a field selector on the scheduler's name.
#include "kube/pod_watch.h"

#include "core/encoding.h"

namespace gantry {

PodWatch::PodWatch(const KubeConfig& config, KubePodPolicy policy, Apply apply, ApplyAll apply_all)
    : policy_(std::move(policy)),
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

WatchedPod PodWatch::Read(const nlohmann::json& pod) const {
  const nlohmann::json& meta = ObjectAt(pod, "metadata");
  return {StringAt(meta, "namespace") + "/" + StringAt(meta, "name"), JobOfPod(pod, policy_), false};
}

}  // namespace gantry
