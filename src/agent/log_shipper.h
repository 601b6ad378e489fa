// Ships the output of a remote agent's jobs to the server, so `gantry logs` works for jobs
// on any node. Each report carries the bytes written since the last acknowledged report,
// per run, rank and stream, by offset; a report the server did not take is sent again from
// the same offsets, and the server skips bytes it already has (a restarted agent starts
// again from 0). Ranks and runs are separate files on both sides: they never mix.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <utility>

namespace gantry {

class LogShipper {
 public:
  // `job_dir` gives the directory holding a job's logs (run-<K>/rank-<N>.<stream>.log).
  explicit LogShipper(std::function<std::string(const std::string& job_id)> job_dir) : job_dir_(std::move(job_dir)) {}

  void Track(const std::string& job_id, int run);
  // The run's processes ended: what is left is shipped, then the run is forgotten.
  void Ended(const std::string& job_id, int run);
  // New output, at most `budget` bytes in all:
  // [{job_id, run, rank, stream, offset, bytes, data (base64)}].
  nlohmann::json Collect(size_t budget);
  // The ended runs whose output the last Collect did not take in full: their exit reports
  // wait for it, so a job is never seen ended before all its output is at the server.
  std::set<std::pair<std::string, int>> Behind();
  // The server took a report with these entries.
  void Acknowledge(const nlohmann::json& entries);
  // Every run's output is shipped again from the start: the agent registered with a server
  // that may not have it (another controller took over, with its own log directory). The
  // server skips what it has.
  void Rewind();

 private:
  struct Run {
    bool ended = false;
    std::map<std::pair<int, std::string>, int64_t> sent;  // (rank, stream) -> bytes the server has
  };
  std::function<std::string(const std::string&)> job_dir_;
  std::mutex mu_;
  std::map<std::pair<std::string, int>, Run> runs_;  // by (job id, run)
  std::set<std::pair<std::string, int>> behind_;
};

}  // namespace gantry
