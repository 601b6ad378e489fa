// PodWaitReporter: the controller's reasons for pending pods, written on the pods.
#include "kube/pod_waits.h"

#include <fmt/format.h>

#include <chrono>
#include <set>

#include "core/clock.h"
#include "core/encoding.h"
#include "core/time.h"
#include "kube/pod_binder.h"

namespace gantry {

nlohmann::json WaitConditionPatch(const KubePodWait& wait, const std::string& now_utc) {
  return {{"metadata", {{"uid", wait.uid}}},  // the pod Gantry means, not a new one of that name
          {"status",
           {{"conditions",
             {{{"type", "PodScheduled"},
               {"status", "False"},
               {"reason", "Unschedulable"},
               {"message", wait.message.substr(0, 4096)},
               {"lastTransitionTime", now_utc}}}}}}};
}

PodWaitReporter::PodWaitReporter(const KubeConfig& config, Source source, int every_ms, int max_patches)
    : client_([&] {
        KubeConfig kept = config;
        kept.keep_alive = true;
        return kept;
      }()),
      source_(std::move(source)),
      every_ms_(every_ms),
      max_patches_(max_patches) {}

PodWaitReporter::~PodWaitReporter() { Stop(); }

void PodWaitReporter::Start() {
  thread_ = std::thread([this] { Run(); });
}

void PodWaitReporter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int PodWaitReporter::rounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rounds_;
}

void PodWaitReporter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Round();
    lock.lock();
    ++rounds_;
    wake_.wait_for(lock, std::chrono::milliseconds(every_ms_), [&] { return stop_; });
  }
}

void PodWaitReporter::Round() {
  std::vector<KubePodWait> waits = source_();
  std::set<std::string> waiting;
  int patched = 0;
  const std::string now = FormatUtc(WallClock().NowMs());
  for (const KubePodWait& w : waits) {
    const std::string key = w.ns + "/" + w.name;
    waiting.insert(key);
    auto told = told_.find(key);
    const bool same_pod = told != told_.end() && told->second.uid == w.uid;
    if (same_pod && told->second.message == w.message) continue;
    if (patched >= max_patches_) continue;  // the next round
    ++patched;
    const std::string path = fmt::format("/api/v1/namespaces/{}/pods/{}/status", UrlEncode(w.ns), UrlEncode(w.name));
    auto r = client_.Patch(path, WaitConditionPatch(w, now), "application/strategic-merge-patch+json");
    if (!r.ok() || !r->ok()) continue;  // gone, or the API server busy: tried again next round
    if (!same_pod || told->second.code != w.code) {
      client_.Post(fmt::format("/api/v1/namespaces/{}/events", UrlEncode(w.ns)),
                   PodEvent(w.ns, w.name, w.uid, "Warning", "FailedScheduling", w.message));
    }
    told_[key] = {w.uid, w.code, w.message};
  }
  for (auto it = told_.begin(); it != told_.end();) it = waiting.count(it->first) ? std::next(it) : told_.erase(it);
}

}  // namespace gantry
