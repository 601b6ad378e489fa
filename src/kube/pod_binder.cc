// PodBinder: binds placed pods (Binding subresource, uid-checked, GPUs as annotations) and
// evicts or deletes stopped ones, on worker threads, with Events on the pods.
#include "kube/pod_binder.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "core/clock.h"
#include "core/encoding.h"
#include "core/kube_pod.h"

namespace gantry {

namespace {

std::string PodPath(const PodRefParts& pod) {
  return fmt::format("/api/v1/namespaces/{}/pods/{}", UrlEncode(pod.ns), UrlEncode(pod.name));
}

std::string EventsPath(const std::string& ns) { return fmt::format("/api/v1/namespaces/{}/events", UrlEncode(ns)); }

// A refusal worth another try: no answer, the API server busy or failing.
bool Transient(const Expected<KubeResponse>& r) { return !r.ok() || r->status == 429 || r->status >= 500; }

constexpr int kTries = 5;

void Backoff(int attempt) {
  if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
}

// Gantry's engine chose this victim; every other stop (a cancel, a time or cost limit, a
// fault) is not a disruption a PodDisruptionBudget is about.
bool IsPreemption(const StopOrder& order) { return order.reason.rfind("preempted", 0) == 0; }

enum class Eviction { kDone, kRefusedForNow, kImpossible };

// Asks the API server to evict the pod (it deletes it with `options` unless a
// PodDisruptionBudget forbids). Done also when the pod is gone or is another pod now.
Eviction Evict(KubeClient& client, const PodRefParts& pod, const nlohmann::json& options, std::string* refusal) {
  const nlohmann::json eviction = {{"apiVersion", "policy/v1beta1"},
                                   {"kind", "Eviction"},
                                   {"metadata", {{"name", pod.name}, {"namespace", pod.ns}}},
                                   {"deleteOptions", options}};
  Expected<KubeResponse> r = Status(StatusCode::kUnavailable, "not tried");
  for (int attempt = 0; attempt < kTries; ++attempt) {
    Backoff(attempt);
    r = client.Post(PodPath(pod) + "/eviction", eviction);
    // 429: a budget that allows no disruption now (or a busy server): asked again later.
    // 500 naming budgets: more than one covers the pod, which no eviction can pass.
    if (r.ok() &&
        (r->status == 429 || (r->status == 500 && r->Error().find("DisruptionBudget") != std::string::npos))) {
      break;
    }
    if (!Transient(r)) break;
  }
  *refusal = r.ok() ? r->Error() : r.status().message();
  // Done: evicted, gone, or another pod of that name now (the uid precondition failed). A
  // 409 that is not about the uid (a budget updated meanwhile) is asked again later.
  if (r.ok() && (r->ok() || r->status == 404)) return Eviction::kDone;
  if (r.ok() && r->status == 409) {
    return refusal->find("UID") != std::string::npos ? Eviction::kDone : Eviction::kRefusedForNow;
  }
  return r.ok() && r->status == 429 ? Eviction::kRefusedForNow : Eviction::kImpossible;
}

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

PodBinder::PodBinder(const KubeConfig& config, NodeReports& reports, DurationMs budget_wait_ms, int workers)
    : reports_(reports), budget_wait_ms_(budget_wait_ms) {
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
  retries_thread_ = std::thread([this] { RunRetries(); });
}

PodBinder::~PodBinder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w->thread.join();
  events_thread_.join();
  retries_thread_.join();
}

void PodBinder::RunEvents() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !events_.empty(); });
    if (stopping_) return;  // Events not sent yet are left
    auto [ns, event] = std::move(events_.front());
    events_.pop_front();
    lock.unlock();
    events_client_->Post(EventsPath(ns), event);
    lock.lock();
  }
}

void PodBinder::RunRetries() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (retries_.empty()) {
      wake_.wait(lock, [&] { return stopping_ || !retries_.empty(); });
      continue;
    }
    const TimeMs now = WallClock().NowMs(), due = retries_.begin()->first;
    if (due > now) {
      wake_.wait_for(lock, std::chrono::milliseconds(due - now));
      continue;
    }
    PendingStop stop = std::move(retries_.begin()->second);
    retries_.erase(retries_.begin());
    const std::string pod = stop.order.kube_pod;
    PostLocked(pod, std::move(stop));
    wake_.notify_all();
  }
}

void PodBinder::Start(const StartOrder& order) {
  const std::vector<std::string>& pods = order.spec->kube_pods;
  if (order.node_rank < 0 || order.node_rank >= static_cast<int>(pods.size())) return;
  Post(pods[order.node_rank], order);
}

void PodBinder::Stop(const StopOrder& order) {
  if (order.kube_pod.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pods_stopping_.insert(order.kube_pod).second) return;
    PostLocked(order.kube_pod, PendingStop{order});
  }
  wake_.notify_all();
}

void PodBinder::Post(const std::string& pod, Order order) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    PostLocked(pod, std::move(order));
  }
  wake_.notify_all();
}

void PodBinder::PostLocked(const std::string& pod, Order order) {
  workers_[std::hash<std::string>()(pod) % workers_.size()]->queue.push_back(std::move(order));
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
    bool settled = false;
    std::string stopped_pod;
    if (auto* stop = std::get_if<PendingStop>(&order)) {
      stopped_pod = stop->order.kube_pod;
      settled = Remove(*worker.client, std::move(*stop));
    }
    lock.lock();
    if (settled) pods_stopping_.erase(stopped_pod);
  }
}

std::string PodBinder::UndoStolenBind(KubeClient& client, const PodRefParts& pod, const StartOrder& order) {
  // Not every API server checks a Binding's uid (1.20 does not): a pod deleted and made
  // again under its name between the placement and the bind would be bound in its place,
  // on GPUs its own scheduler never counted. Such a pod is deleted; the placed one is gone.
  Expected<KubeResponse> now = Status(StatusCode::kUnavailable, "not tried");
  for (int attempt = 0; attempt < kTries; ++attempt) {
    Backoff(attempt);
    now = client.Get(PodPath(pod));
    if (!Transient(now)) break;
  }
  if (!now.ok() || !now->ok()) return "";  // gone (the watch says so), or no answer: nothing to undo
  const nlohmann::json& meta = ObjectAt(now->body, "metadata");
  const std::string uid = StringAt(meta, "uid");
  if (uid.empty() || uid == pod.uid) return "";
  // Another pod of the name on the node Gantry bound to: the bind landed on it. (Not its
  // annotations: the pod's owner may write those.)
  if (StringAt(ObjectAt(now->body, "spec"), "nodeName") != order.node_id) return "";
  const nlohmann::json options = {
      {"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", 0}, {"preconditions", {{"uid", uid}}}};
  client.Post(EventsPath(pod.ns),
              PodEvent(pod.ns, pod.name, uid, "Warning", "BindingStolen",
                       fmt::format("this pod replaced pod {} of the same name after Gantry placed that one (job {}) "
                                   "and got its bind to {}; Gantry deletes it",
                                   pod.uid, order.job_id, order.node_id)));
  client.Delete(PodPath(pod), options);
  return fmt::format("pod {}/{} was replaced by another of that name (uid {}) before its bind; that one was deleted",
                     pod.ns, pod.name, uid);
}

void PodBinder::Bind(KubeClient& client, const StartOrder& order) {
  const PodRefParts pod = SplitPodRef(order.spec->kube_pods[order.node_rank]);
  nlohmann::json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata",
       {{"name", pod.name}, {"namespace", pod.ns}, {"uid", pod.uid}, {"annotations", BindingAnnotations(order)}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", order.node_id}}}};
  Expected<KubeResponse> r = Status(StatusCode::kUnavailable, "not tried");
  for (int attempt = 0; attempt < kTries; ++attempt) {
    Backoff(attempt);
    r = client.Post(PodPath(pod) + "/binding", binding);
    if (!Transient(r)) break;
  }
  std::string refusal;
  if (r.ok() && r->status == 409) {
    // Bound already: by this placement before a restart (fine), or elsewhere (not ours).
    auto now = client.Get(PodPath(pod));
    std::string node = now.ok() && now->ok() ? StringAt(ObjectAt(now->body, "spec"), "nodeName") : "";
    std::string uid = now.ok() && now->ok() ? StringAt(ObjectAt(now->body, "metadata"), "uid") : "";
    if (node == order.node_id && uid != pod.uid) {
      refusal = UndoStolenBind(client, pod, order);  // an earlier try bound a pod made again
    } else if (node != order.node_id) {
      refusal = r->Error();
    }
  } else if (!r.ok()) {
    refusal = r.status().message();
  } else if (!r->ok()) {
    refusal = r->Error();
  } else {
    refusal = UndoStolenBind(client, pod, order);
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

bool PodBinder::Remove(KubeClient& client, PendingStop stop) {
  const StopOrder& order = stop.order;
  const PodRefParts pod = SplitPodRef(order.kube_pod);
  if (pod.uid.empty()) return true;
  const bool preempted = IsPreemption(order);
  auto tell = [&](const char* reason, const std::string& message) {
    client.Post(EventsPath(pod.ns), PodEvent(pod.ns, pod.name, pod.uid, "Warning", reason, message));
  };
  if (stop.refused_since_ms < 0) {
    tell(preempted ? "Preempted" : "Stopping",
         fmt::format("Gantry job {} stops ({}s to finish): {}", order.job_id, order.grace_ms / 1000, order.reason));
  }
  const nlohmann::json options = {{"apiVersion", "v1"},
                                  {"kind", "DeleteOptions"},
                                  {"gracePeriodSeconds", order.grace_ms / 1000},
                                  {"preconditions", {{"uid", pod.uid}}}};
  if (preempted) {
    const TimeMs now = WallClock().NowMs();
    std::string refusal;
    const bool waited_enough = stop.refused_since_ms >= 0 && now - stop.refused_since_ms >= budget_wait_ms_;
    const Eviction eviction = waited_enough ? Eviction::kImpossible : Evict(client, pod, options, &refusal);
    if (eviction == Eviction::kDone) return true;
    if (eviction == Eviction::kRefusedForNow && !waited_enough && budget_wait_ms_ > 0) {
      if (stop.refused_since_ms < 0) {
        stop.refused_since_ms = now;
        tell("EvictionRefused", fmt::format("{}; Gantry asks again every {}s and deletes the pod after {}s",
                                            refusal.substr(0, 512), kEvictionRetryMs / 1000, budget_wait_ms_ / 1000));
      }
      // Again in 5 s, or when the wait is over if that comes first.
      const TimeMs due = std::min(now + kEvictionRetryMs, stop.refused_since_ms + budget_wait_ms_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        retries_.emplace(due, std::move(stop));
      }
      wake_.notify_all();
      return false;
    }
    tell("EvictionOverridden",
         waited_enough
             ? fmt::format("the eviction was refused for {}s (its PodDisruptionBudget); Gantry deletes the pod",
                           (now - stop.refused_since_ms) / 1000)
             : fmt::format("the eviction cannot be done ({}); Gantry deletes the pod", refusal.substr(0, 512)));
  }
  for (int attempt = 0; attempt < kTries; ++attempt) {
    Backoff(attempt);
    auto r = client.Delete(PodPath(pod), options);
    if (!Transient(r)) break;  // done, or gone already (404), or another pod now (409)
  }
  return true;
}

}  // namespace gantry
