// The link through which the controller's placements of pods reach Kubernetes, as orders
// reach an agent: a Start binds the pod to its node through the Binding subresource (only
// if it is still the pod Gantry placed: its uid), with the GPUs Gantry chose written on it
// as annotations, and tells the pod (an Event); a Stop tells the pod why, then deletes it
// with its grace period. A preemption asks through the Eviction API instead, so that a
// PodDisruptionBudget is honoured: refused, it is asked again every few seconds, and past
// the wait it is given (`budget_wait_ms`) the pod is deleted all the same, with an Event
// saying so, as kube-scheduler's own preemption does when no victim leaves every budget
// whole. A bind Kubernetes refuses ends that run, as an agent's failed start would. Workers call the API server off the
// controller's threads; one pod's orders go through one worker, in order. A bind's Event goes out after it, from a
// worker of its own, so Events never hold up binds (a burst of pods is bound first, told after).
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <variant>
#include <vector>

#include "core/kube_pod.h"
#include "kube/kube_client.h"
#include "protocol/node_link.h"

namespace gantry {

// The annotations a bound pod carries: what Gantry placed it on, for the pod's own
// environment (the downward API: fieldRef metadata.annotations['gantry.io/visible-devices']).
nlohmann::json BindingAnnotations(const StartOrder& order);

// An Event on a pod ("Normal" or "Warning"), from the component "gantry".
nlohmann::json PodEvent(const std::string& ns, const std::string& name, const std::string& uid, const std::string& type,
                        const std::string& reason, const std::string& message);

class PodBinder : public NodeLink {
 public:
  PodBinder(const KubeConfig& config, NodeReports& reports, DurationMs budget_wait_ms = 60'000, int workers = 8);
  ~PodBinder() override;
  PodBinder(const PodBinder&) = delete;
  PodBinder& operator=(const PodBinder&) = delete;

  void Start(const StartOrder& order) override;
  void Stop(const StopOrder& order) override;

 private:
  // A stop on its way: when an eviction of its pod was first refused (-1: not yet).
  struct PendingStop {
    StopOrder order;
    TimeMs refused_since_ms = -1;
  };
  using Order = std::variant<StartOrder, PendingStop>;
  struct Worker {
    std::unique_ptr<KubeClient> client;
    std::deque<Order> queue;
    std::thread thread;
  };
  void Post(const std::string& pod, Order order);
  void PostLocked(const std::string& pod, Order order);
  void Run(Worker& worker);
  void Bind(KubeClient& client, const StartOrder& order);
  // After a bind: if another pod of the same name (not the placed uid) got it, deletes that
  // pod and says why ("" when the bound pod is the placed one).
  std::string UndoStolenBind(KubeClient& client, const PodRefParts& pod, const StartOrder& order);
  // Evicts (a preemption) or deletes the stopped pod; false when a refused eviction is to be
  // tried again later (the stop is not over).
  bool Remove(KubeClient& client, PendingStop stop);
  // Hands refused evictions back to their workers when they are due (one thread).
  void RunRetries();
  static constexpr DurationMs kEvictionRetryMs = 5000;
  // Sends the queued Events (one thread); at most kMaxQueuedEvents wait, later ones are dropped.
  void RunEvents();
  static constexpr size_t kMaxQueuedEvents = 10000;

  NodeReports& reports_;
  const DurationMs budget_wait_ms_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<KubeClient> events_client_;
  std::deque<std::pair<std::string, nlohmann::json>> events_;  // namespace, Event
  std::thread events_thread_;
  std::multimap<TimeMs, PendingStop> retries_;  // by when they are due
  std::set<std::string> pods_stopping_;         // a pod's stop is on its way: a second is dropped
  std::thread retries_thread_;
};

}  // namespace gantry
