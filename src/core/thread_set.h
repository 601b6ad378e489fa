// Threads that end on their own (a session's, a connection's), joined as they end: each
// Spawn first joins the ones that finished, and JoinAll (or the destructor) waits for the
// rest. So a long-lived process that starts many never keeps more than run at once.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace gantry {

class ThreadSet {
 public:
  ThreadSet() = default;
  ThreadSet(const ThreadSet&) = delete;
  ThreadSet& operator=(const ThreadSet&) = delete;
  ~ThreadSet() { JoinAll(); }

  void Spawn(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    JoinFinished();
    int n = next_++;
    threads_[n] = std::thread([this, n, task = std::move(task)] {
      task();
      std::lock_guard<std::mutex> done(mu_);
      finished_.push_back(n);
    });
  }
  // Waits for every thread (new ones may be spawned meanwhile: they are waited for too).
  void JoinAll() {
    for (;;) {
      std::map<int, std::thread> all;
      {
        std::lock_guard<std::mutex> lock(mu_);
        finished_.clear();
        all.swap(threads_);
      }
      if (all.empty()) return;
      for (auto& [n, t] : all) t.join();
    }
  }

 private:
  void JoinFinished() {
    for (int n : finished_) {
      if (auto it = threads_.find(n); it != threads_.end()) {
        it->second.join();
        threads_.erase(it);
      }
    }
    finished_.clear();
  }
  std::mutex mu_;
  std::map<int, std::thread> threads_;
  std::vector<int> finished_;
  int next_ = 0;
};

}  // namespace gantry
