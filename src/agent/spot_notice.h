// Spot interruption notices: the agent looks at a notice source every few seconds (a file
// that appears, or a command such as examples/autoscaler/aws-spot-notice.sh that asks the
// cloud's metadata endpoint) and, the first time it says the node is being reclaimed,
// reports it (NodeReports::Reclaim). The controller then drains the node and stops its jobs
// in time to checkpoint, and they requeue on other nodes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>

#include "protocol/node_link.h"

namespace gantry {

struct SpotNoticeOptions {
  std::string file;     // a notice when it exists
  std::string command;  // a notice when it exits 0 and prints something
  DurationMs interval_ms = 5 * kSecondMs;
  DurationMs default_notice_ms = 2 * kMinuteMs;  // when the source gives no time (AWS's two minutes)
  bool enabled() const { return !file.empty() || !command.empty(); }
};

// The time left that a notice's text gives: "" -> `fallback`; "90" -> 90 s; a UTC time
// ("2026-11-27T10:00:00Z") -> until then (0 when past). Null for anything else.
std::optional<DurationMs> ParseNoticeText(const std::string& text, TimeMs now, DurationMs fallback);

class SpotNoticeWatcher {
 public:
  SpotNoticeWatcher(SpotNoticeOptions options, std::string node_id, NodeReports& reports, std::ostream& log);
  ~SpotNoticeWatcher() { Stop(); }
  void Start();
  void Stop();
  // One look at the source now: the notice, when there is one (tests; the thread uses it).
  std::optional<NodeNotice> Look();

 private:
  SpotNoticeOptions options_;
  std::string node_id_;
  NodeReports& reports_;
  std::ostream& log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

}  // namespace gantry
