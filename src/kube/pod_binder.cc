// PodBinder: binds placed pods (Binding subresource, uid-checked, GPUs as annotations) and
// deletes stopped ones, on worker threads, with Events on the pods.
#include "kube/pod_binder.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "core/clock.h"
#include "core/encoding.h"

namespace gantry {

namespace {

struct PodName {
  std::string ns, name, uid;
};
PodName SplitRef(const std::string& ref) {
  size_t a = ref.find('/'), b = ref.rfind('/');
  if (a == std::string::npos || a == b) return {};
  return {ref.substr(0, a), ref.substr(a + 1, b - a - 1), ref.substr(b + 1)};
}

std::string PodPath(const PodName& pod) {
  return fmt::format("/api/v1/namespaces/{}/pods/{}", UrlEncode(pod.ns), UrlEncode(pod.name));
}

// A refusal worth another try: no answer, the API server busy or failing.
bool Transient(const Expected<KubeResponse>& r) { return !r.ok() || r->status == 429 || r->status >= 500; }

constexpr int kTries = 5;

}  // namespace

nlohmann::json BindingAnnotations(const StartOrder& order) {
  std::string indices, uuids;
  bool all_uuids = !order.gpus.empty();
  for (const AssignedGpu& g : order.gpus) {
    indices += (indices.empty() ? "" : ",") + std::to_string(g.index);
    const std::string& uuid = g.mig_uuid.empty() ? g.uuid : g.mig_uuid;
    uuids += (uuids.empty() ? "" : ",") + uuid;
    all_uuids = all_uuids && !uuid.empty();
  }
  nlohmann::json a = {{"gantry.io/job", order.job_id},
                      {"gantry.io/gpus", indices},
                      {"gantry.io/visible-devices", all_uuids ? uuids : indices},
                      {"gantry.io/sharing", ToString(order.sharing)}};
  if (order.num_nodes > 1) {
    a["gantry.io/gang-rank"] = std::to_string(order.node_rank);
    a["gantry.io/gang-size"] = std::to_string(order.num_nodes);
  }
  if (!order.gpus.empty()) {
    const AssignedGpu& g = order.gpus.front();
    if (g.milli < 1000) a["gantry.io/gpu-share"] = fmt::format("{}", g.milli / 1000.0);
    if (g.mps_thread_percent > 0) a["gantry.io/mps-thread-percent"] = std::to_string(g.mps_thread_percent);
    if (g.memory_mib > 0) a["gantry.io/gpu-memory-limit"] = fmt::format("{}Mi", g.memory_mib);
    if (!g.mig_profile.empty()) a["gantry.io/mig-profile"] = g.mig_profile;
  }
  return a;
}

nlohmann::json PodEvent(const std::string& ns, const std::string& name, const std::string& uid, const std::string& type,
                        const std::string& reason, const std::string& message) {
  const std::string now = FormatUtc(WallClock().NowMs());
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"generateName", name + "."}, {"namespace", ns}}},
          {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", ns}, {"name", name}, {"uid", uid}}},
          {"type", type},
          {"reason", reason},
          {"message", message.substr(0, 1024)},
          {"source", {{"component", "gantry"}}},
          {"reportingComponent", "gantry"},
          {"firstTimestamp", now},
          {"lastTimestamp", now},
          {"count", 1}};
}

PodBinder::PodBinder(const KubeConfig& config, NodeReports& reports, int workers) : reports_(reports) {
  KubeConfig kept = config;
  kept.keep_alive = true;
  for (int i = 0; i < std::max(1, workers); ++i) {
    auto w = std::make_unique<Worker>();
    w->client = std::make_unique<KubeClient>(kept);
    workers_.push_back(std::move(w));
  }
  events_client_ = std::make_unique<KubeClient>(kept);
  for (auto& w : workers_) w->thread = std::thread([this, worker = w.get()] { Run(*worker); });
  events_thread_ = std::thread([this] { RunEvents(); });
}

PodBinder::~PodBinder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w->thread.join();
  events_thread_.join();
}

void PodBinder::RunEvents() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !events_.empty(); });
    if (stopping_) return;  // Events not sent yet are left
    auto [ns, event] = std::move(events_.front());
    events_.pop_front();
    lock.unlock();
    events_client_->Post(fmt::format("/api/v1/namespaces/{}/events", UrlEncode(ns)), event);
    lock.lock();
  }
}

void PodBinder::Start(const StartOrder& order) {
  const std::vector<std::string>& pods = order.spec->kube_pods;
  if (order.node_rank < 0 || order.node_rank >= static_cast<int>(pods.size())) return;
  Post(pods[order.node_rank], order);
}

void PodBinder::Stop(const StopOrder& order) {
  if (!order.kube_pod.empty()) Post(order.kube_pod, order);
}

void PodBinder::Post(const std::string& pod, Order order) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_[std::hash<std::string>()(pod) % workers_.size()]->queue.push_back(std::move(order));
  }
  wake_.notify_all();
}

void PodBinder::Run(Worker& worker) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !worker.queue.empty(); });
    // Stopping: what is not sent yet is left. A placement is durable before its bind, and
    // the next leader's list binds again what was placed and not bound.
    if (stopping_) return;
    Order order = std::move(worker.queue.front());
    worker.queue.pop_front();
    lock.unlock();
    if (const auto* start = std::get_if<StartOrder>(&order)) Bind(*worker.client, *start);
    if (const auto* stop = std::get_if<StopOrder>(&order)) Delete(*worker.client, *stop);
    lock.lock();
  }
}

void PodBinder::Bind(KubeClient& client, const StartOrder& order) {
  const PodName pod = SplitRef(order.spec->kube_pods[order.node_rank]);
  nlohmann::json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata",
       {{"name", pod.name}, {"namespace", pod.ns}, {"uid", pod.uid}, {"annotations", BindingAnnotations(order)}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", order.node_id}}}};
  Expected<KubeResponse> r = Status(StatusCode::kUnavailable, "not tried");
  for (int attempt = 0; attempt < kTries; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    r = client.Post(PodPath(pod) + "/binding", binding);
    if (!Transient(r)) break;
  }
  std::string refusal;
  if (r.ok() && r->status == 409) {
    // Bound already: by this placement before a restart (fine), or elsewhere (not ours).
    auto now = client.Get(PodPath(pod));
    std::string node = now.ok() && now->ok() ? StringAt(ObjectAt(now->body, "spec"), "nodeName") : "";
    std::string uid = now.ok() && now->ok() ? StringAt(ObjectAt(now->body, "metadata"), "uid") : "";
    if (node != order.node_id || uid != pod.uid) refusal = r->Error();
  } else if (!r.ok()) {
    refusal = r.status().message();
  } else if (!r->ok()) {
    refusal = r->Error();
  }
  if (!refusal.empty()) {
    RunReport failed{order.job_id,
                     order.run,
                     order.node_id,
                     true,
                     1,
                     "Kubernetes did not bind the pod: " + refusal.substr(0, 512),
                     -1};
    reports_.RunExited(failed);
    return;
  }
  std::string gpus = BindingAnnotations(order).value("gantry.io/gpus", "");
  nlohmann::json event = PodEvent(pod.ns, pod.name, pod.uid, "Normal", "Scheduled",
                                  fmt::format("Successfully assigned {}/{} to {} (Gantry job {}, GPUs {})", pod.ns,
                                              pod.name, order.node_id, order.job_id, gpus.empty() ? "none" : gpus));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.size() < kMaxQueuedEvents) events_.emplace_back(pod.ns, std::move(event));
  }
  wake_.notify_all();
}

void PodBinder::Delete(KubeClient& client, const StopOrder& order) {
  const PodName pod = SplitRef(order.kube_pod);
  if (pod.uid.empty()) return;
  const bool preempted = order.reason.rfind("preempted", 0) == 0;
  client.Post(fmt::format("/api/v1/namespaces/{}/events", UrlEncode(pod.ns)),
              PodEvent(pod.ns, pod.name, pod.uid, "Warning", preempted ? "Preempted" : "Stopping",
                       fmt::format("Gantry job {} stops ({}s to finish): {}", order.job_id, order.grace_ms / 1000,
                                   order.reason)));
  nlohmann::json options = {{"apiVersion", "v1"},
                            {"kind", "DeleteOptions"},
                            {"gracePeriodSeconds", order.grace_ms / 1000},
                            {"preconditions", {{"uid", pod.uid}}}};
  for (int attempt = 0; attempt < kTries; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    auto r = client.Delete(PodPath(pod), options);
    if (!Transient(r)) return;  // done, or gone already (404), or another pod now (409)
  }
}

}  // namespace gantry
