// Keeps up with one collection of Kubernetes objects (say the cluster's Nodes), the way
// client-go's reflector does: list, then watch from the list's resourceVersion with
// bookmarks (so a quiet watch still moves its version on), list again when the server says
// the version is gone (410), and back off on errors, doubling from 1 s to 30 s.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/kube_client.h"

namespace gantry {

struct WatchHandlers {
  // The whole collection, after each list (the first and every relist): what is not in it
  // is gone.
  std::function<void(const std::vector<nlohmann::json>& items)> listed;
  // A change: "ADDED", "MODIFIED" or "DELETED", and the object (as it was, when deleted).
  std::function<void(const std::string& type, const nlohmann::json& object)> changed;
};

class WatchLoop {
 public:
  // `collection` is the API path (/api/v1/nodes); `selector` a query of its own
  // ("labelSelector=..."), or empty. The loop has a client of its own (Stop ends its watch).
  WatchLoop(const KubeConfig& config, std::string collection, std::string selector, WatchHandlers handlers);
  ~WatchLoop();
  WatchLoop(const WatchLoop&) = delete;
  WatchLoop& operator=(const WatchLoop&) = delete;

  void Start();
  void Stop();

  // The 410s it met (a relist followed each), and the state it is in.
  int gone() const { return gone_; }
  std::string resource_version() const;
  std::string last_error() const;

 private:
  void Run();
  // Lists every page; false on an error (noted).
  bool List();
  // One watch; false on an error (noted). Clears the version on 410.
  bool WatchOnce();
  void Note(const std::string& error);
  // Waits `seconds` or until Stop; true when stopping.
  bool Pause(int seconds);

  KubeClient client_;
  std::string collection_, selector_;
  WatchHandlers handlers_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::string version_, error_;
  std::atomic<int> gone_{0};
};

}  // namespace gantry
