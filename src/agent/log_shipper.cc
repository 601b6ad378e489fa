// Log shipping from remote agents.
#include "agent/log_shipper.h"

#include <filesystem>
#include <fstream>

#include "core/encoding.h"
#include "core/log_window.h"

namespace gantry {

namespace {
constexpr const char* kStreams[] = {"stdout", "stderr"};
}  // namespace

void LogShipper::Track(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[job_id].ended = false;
}

void LogShipper::Ended(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[job_id].ended = true;
}

nlohmann::json LogShipper::Collect(size_t budget) {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  std::error_code ec;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    bool all_sent = true;
    for (const char* stream : kStreams) {
      std::string path = job_dir_(it->first) + "/" + stream + ".log";
      if (!std::filesystem::exists(path, ec)) continue;
      // Logical offsets: a log cut at its cap goes on from the oldest byte it still has.
      int64_t size = LogLogicalSize(path);
      int64_t from = it->second.sent[stream];
      if (size <= from) continue;
      all_sent = false;
      if (budget == 0) continue;
      size_t n = std::min<size_t>(budget, static_cast<size_t>(size - from));
      int64_t next = from;
      std::string chunk = ReadLog(path, from, n, &next);
      from = next - static_cast<int64_t>(chunk.size());
      budget -= chunk.size();
      out.push_back({{"job_id", it->first},
                     {"stream", stream},
                     {"offset", from},
                     {"bytes", chunk.size()},
                     {"data", Base64Encode(chunk)}});
    }
    // An ended job whose output the server has in full is done.
    it = it->second.ended && all_sent ? jobs_.erase(it) : std::next(it);
  }
  return out;
}

void LogShipper::Acknowledge(const nlohmann::json& entries) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries) {
    auto it = jobs_.find(e.value("job_id", ""));
    if (it == jobs_.end()) continue;
    int64_t end = e.value("offset", int64_t{0}) + e.value("bytes", int64_t{0});
    int64_t& sent = it->second.sent[e.value("stream", "")];
    sent = std::max(sent, end);
  }
}

}  // namespace gantry
