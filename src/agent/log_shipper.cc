// Log shipping from remote agents.
#include "agent/log_shipper.h"

#include "core/encoding.h"
#include "core/job_logs.h"
#include "core/log_window.h"

namespace gantry {

void LogShipper::Track(const std::string& job_id, int run) {
  std::lock_guard<std::mutex> lock(mu_);
  runs_[{job_id, run}].ended = false;
}

void LogShipper::Ended(const std::string& job_id, int run) {
  std::lock_guard<std::mutex> lock(mu_);
  runs_[{job_id, run}].ended = true;
}

nlohmann::json LogShipper::Collect(size_t budget) {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  behind_.clear();
  for (auto it = runs_.begin(); it != runs_.end();) {
    const auto& [job_id, run] = it->first;
    bool all_sent = true, all_taken = true;
    for (const RunLogFile& f : ListRunLogs(job_dir_(job_id), run)) {
      // Logical offsets: a log cut at its cap goes on from the oldest byte it still has.
      int64_t size = LogLogicalSize(f.path);
      int64_t from = it->second.sent[{f.rank, f.stream}];
      if (size <= from) continue;
      all_sent = false;
      if (budget == 0) {
        all_taken = false;
        continue;
      }
      size_t n = std::min<size_t>(budget, static_cast<size_t>(size - from));
      int64_t next = from;
      std::string chunk = ReadLog(f.path, from, n, &next);
      from = next - static_cast<int64_t>(chunk.size());
      budget -= chunk.size();
      all_taken = all_taken && next >= size;
      out.push_back({{"job_id", job_id},
                     {"run", run},
                     {"rank", f.rank},
                     {"stream", f.stream},
                     {"offset", from},
                     {"bytes", chunk.size()},
                     {"data", Base64Encode(chunk)}});
    }
    if (it->second.ended && !all_taken) behind_.insert(it->first);
    // An ended run whose output the server has in full is done.
    it = it->second.ended && all_sent ? runs_.erase(it) : std::next(it);
  }
  return out;
}

std::set<std::pair<std::string, int>> LogShipper::Behind() {
  std::lock_guard<std::mutex> lock(mu_);
  return behind_;
}

void LogShipper::Acknowledge(const nlohmann::json& entries) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries) {
    auto it = runs_.find({e.value("job_id", ""), e.value("run", 0)});
    if (it == runs_.end()) continue;
    int64_t end = e.value("offset", int64_t{0}) + e.value("bytes", int64_t{0});
    int64_t& sent = it->second.sent[{e.value("rank", 0), e.value("stream", "")}];
    sent = std::max(sent, end);
  }
}

void LogShipper::Rewind() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, run] : runs_) run.sent.clear();
}

}  // namespace gantry
