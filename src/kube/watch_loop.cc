// The list-and-watch loop of one collection.
#include "kube/watch_loop.h"

#include <fmt/format.h>

#include <algorithm>

namespace gantry {

namespace {
constexpr int kWatchSeconds = 300;  // the server ends each watch after this; a new one follows
constexpr int kMaxBackoffSeconds = 30;
constexpr int kMinSecondsApart = 1;  // between the starts of two lists or watches
}  // namespace

WatchLoop::WatchLoop(const KubeConfig& config, std::string collection, std::string selector, WatchHandlers handlers)
    : client_(config),
      collection_(std::move(collection)),
      selector_(std::move(selector)),
      handlers_(std::move(handlers)) {}

WatchLoop::~WatchLoop() { Stop(); }

void WatchLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void WatchLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  client_.Stop();
  if (thread_.joinable()) thread_.join();
}

std::string WatchLoop::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

std::string WatchLoop::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void WatchLoop::Note(const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  error_ = error;
}

bool WatchLoop::Pause(int seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return wake_.wait_for(lock, std::chrono::seconds(seconds), [this] { return stop_; });
}

void WatchLoop::Run() {
  int backoff = 1;
  auto last_start = std::chrono::steady_clock::now() - std::chrono::seconds(kMinSecondsApart);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    // A list or watch that ended at once (a proxy closing streams, 410s in a row) does not
    // become a tight loop of requests: starts are a second apart at least.
    auto since = std::chrono::steady_clock::now() - last_start;
    if (since < std::chrono::seconds(kMinSecondsApart) && Pause(kMinSecondsApart)) return;
    last_start = std::chrono::steady_clock::now();
    bool ok = false;
    try {
      ok = resource_version().empty() ? List() : WatchOnce();
    } catch (const std::exception& e) {  // a handler's failure: noted, and the loop lists again
      Note(std::string("handling ") + collection_ + ": " + e.what());
      std::lock_guard<std::mutex> lock(mu_);
      version_.clear();
    }
    if (ok) {
      backoff = 1;
      continue;
    }
    if (Pause(backoff)) return;
    backoff = std::min(backoff * 2, kMaxBackoffSeconds);
  }
}

bool WatchLoop::List() {
  std::vector<nlohmann::json> items;
  std::string next, version;
  do {
    std::string path = fmt::format("{}?limit=500{}{}", collection_, selector_.empty() ? "" : "&" + selector_,
                                   next.empty() ? "" : "&continue=" + UrlEncode(next));
    auto r = client_.Get(path);
    if (!r) return Note(r.status().message()), false;
    // The continue token expired between pages: this list is not whole, and a partial list
    // would read as Nodes deleted. The loop lists again from the start.
    if (r->status == 410) return Note("list " + collection_ + ": expired between pages"), false;
    if (!r->ok()) return Note(fmt::format("list {}: {}", collection_, r->Error())), false;
    const nlohmann::json& meta = ObjectAt(r->body, "metadata");
    for (const nlohmann::json& item : ArrayAt(r->body, "items")) items.push_back(item);
    next = StringAt(meta, "continue");
    version = StringAt(meta, "resourceVersion");
  } while (!next.empty());
  if (version.empty()) return Note("list " + collection_ + ": no resourceVersion in the answer"), false;
  if (handlers_.listed) handlers_.listed(items);
  std::lock_guard<std::mutex> lock(mu_);
  version_ = version;
  error_.clear();
  return true;
}

bool WatchLoop::WatchOnce() {
  std::string path =
      fmt::format("{}?watch=1&allowWatchBookmarks=true&timeoutSeconds={}&resourceVersion={}{}", collection_,
                  kWatchSeconds, UrlEncode(resource_version()), selector_.empty() ? "" : "&" + selector_);
  bool expired = false;
  std::string failure;
  auto r = client_.Watch(path, kWatchSeconds + 30, [&](const nlohmann::json& event) {
    std::string type = StringAt(event, "type");
    const nlohmann::json& object = ObjectAt(event, "object");
    if (type == "ERROR") {  // a Status object: 410 when the version is too old to watch from
      if (IntAt(object, "code") == 410) {
        expired = true;
      } else {
        failure = fmt::format("watch {}: {}", collection_, StringAt(object, "message"));
      }
      return false;
    }
    std::string version = StringAt(ObjectAt(object, "metadata"), "resourceVersion");
    if (type != "BOOKMARK" && handlers_.changed) handlers_.changed(type, object);
    if (!version.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      version_ = version;
    }
    return true;
  });
  if (r && r->status == 410) expired = true;
  if (expired) {
    ++gone_;
    std::lock_guard<std::mutex> lock(mu_);
    version_.clear();  // list again: changes in between are in the new list
    return true;
  }
  if (!r) return Note(r.status().message()), false;
  if (!r->ok()) return Note(fmt::format("watch {}: {}", collection_, r->Error())), false;
  if (!failure.empty()) return Note(failure), false;
  return true;
}

}  // namespace gantry
