// The link through which the controller's placements of pods reach Kubernetes, as orders
// reach an agent: a Start binds the pod to its node through the Binding subresource (only
// if it is still the pod Gantry placed: its uid), with the GPUs Gantry chose written on it
// as annotations, and tells the pod (an Event); a Stop tells the pod why, then deletes it
// with its grace period. A bind Kubernetes refuses ends that run, as an agent's failed
// start would. Workers call the API server off the controller's threads; one pod's orders
// go through one worker, in order. A bind's Event goes out after it, from a worker of its
// own, so Events never hold up binds (a burst of pods is bound first, told after).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

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
  PodBinder(const KubeConfig& config, NodeReports& reports, int workers = 8);
  ~PodBinder() override;
  PodBinder(const PodBinder&) = delete;
  PodBinder& operator=(const PodBinder&) = delete;

  void Start(const StartOrder& order) override;
  void Stop(const StopOrder& order) override;

 private:
  using Order = std::variant<StartOrder, StopOrder>;
  struct Worker {
    std::unique_ptr<KubeClient> client;
    std::deque<Order> queue;
    std::thread thread;
  };
  void Post(const std::string& pod, Order order);
  void Run(Worker& worker);
  void Bind(KubeClient& client, const StartOrder& order);
  void Delete(KubeClient& client, const StopOrder& order);
  // Sends the queued Events (one thread); at most kMaxQueuedEvents wait, later ones are dropped.
  void RunEvents();
  static constexpr size_t kMaxQueuedEvents = 10000;

  NodeReports& reports_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<KubeClient> events_client_;
  std::deque<std::pair<std::string, nlohmann::json>> events_;  // namespace, Event
  std::thread events_thread_;
};

}  // namespace gantry
