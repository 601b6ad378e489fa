// Tells each pending pod of Gantry's why it waits, where a Kubernetes user looks (`kubectl
// describe pod`): the PodScheduled condition, False with reason Unschedulable and Gantry's
// own words (those of `gantry queue`: why, what it waits for, the estimated start), patched
// only when the words change; and a FailedScheduling Event when the kind of wait changes.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kube/kube_client.h"
#include "state/kube_pod_facts.h"

namespace gantry {

// The strategic-merge patch of a pod's status that says why it waits.
nlohmann::json WaitConditionPatch(const KubePodWait& wait, const std::string& now_utc);

class PodWaitReporter {
 public:
  using Source = std::function<std::vector<KubePodWait>()>;
  // `source` says why each pending pod waits now (the controller's answer); asked every
  // `every_ms`, at most `max_patches` pods patched a round (the rest the next).
  PodWaitReporter(const KubeConfig& config, Source source, int every_ms = 1000, int max_patches = 500);
  ~PodWaitReporter();
  void Start();
  void Stop();
  // Rounds done so far (tests wait on it).
  int rounds() const;

 private:
  void Run();
  void Round();

  KubeClient client_;
  Source source_;
  int every_ms_, max_patches_;
  struct Told {
    std::string uid, code, message;
  };
  std::map<std::string, Told> told_;  // namespace/name -> what the pod was last told
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  int rounds_ = 0;
  std::thread thread_;
};

}  // namespace gantry
