// Keeps up with the pods that ask for Gantry (spec.schedulerName, by a field selector, so
// the API server sends no other pod): each read as a job (core/kube_pod.h), or with the
// reason it cannot be one, for the controller to queue, bind, or tell the pod why not.
// One watch of every namespace, from the controller that leads. A gang named by the
// coscheduling label (scheduling.x-k8s.io/pod-group) without Gantry's member-count
// annotation takes its count from the PodGroup object's spec.minMember.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/kube_pod.h"
#include "kube/watch_loop.h"
#include "state/kube_pod_facts.h"

namespace gantry {

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
  WatchedPod Read(const nlohmann::json& pod);
  // The PodGroup's minMember (0: none, or not readable), asked again after a while.
  int PodGroupMinMember(const std::string& ns, const std::string& name);

  KubePodPolicy policy_;
  KubeClient groups_;  // PodGroup reads (the watch thread only)
  struct Group {
    int min_member = 0;
    std::chrono::steady_clock::time_point read;
  };
  std::map<std::string, Group> groups_read_;
  Apply apply_;
  ApplyAll apply_all_;
  WatchLoop loop_;
};

}  // namespace gantry
