// Keeps up with the pods that ask for Gantry (spec.schedulerName, by a field selector, so
// the API server sends no other pod): each read as a job (kube/pod_job.h), or with the
// reason it cannot be one, for the controller to queue, bind, or tell the pod why not.
// One watch of every namespace, from the controller that leads.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kube/pod_job.h"
#include "kube/watch_loop.h"

namespace gantry {

// One pod as the watch saw it: `job` read from it (or why not), and whether it is gone
// (a pod still terminating is not: its job's `deleting` says so).
struct WatchedPod {
  std::string key;  // namespace/name
  Expected<KubePodJob> job;
  bool deleted = false;
};

class PodWatch {
 public:
  // One pod changed (a watch event).
  using Apply = std::function<void(const WatchedPod& pod)>;
  // Every such pod there is, after a list: what is not in it is gone.
  using ApplyAll = std::function<void(const std::vector<WatchedPod>& pods)>;
  PodWatch(const KubeConfig& config, KubePodPolicy policy, Apply apply, ApplyAll apply_all);
  void Start() { loop_.Start(); }
  void Stop() { loop_.Stop(); }
  const WatchLoop& loop() const { return loop_; }

 private:
  WatchedPod Read(const nlohmann::json& pod) const;

  KubePodPolicy policy_;
  Apply apply_;
  ApplyAll apply_all_;
  WatchLoop loop_;
};

}  // namespace gantry
