// Ships the output of a remote agent's jobs to the server, so `gantry logs` works for jobs
// on any node. Each report carries the bytes written since the last acknowledged report,
// by offset; a report the server did not take is sent again from the same offsets, and the
// server skips bytes it already has (a restarted agent starts again from 0).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace gantry {

class LogShipper {
 public:
  // `job_dir` gives the directory holding a job's stdout.log and stderr.log.
  explicit LogShipper(std::function<std::string(const std::string& job_id)> job_dir) : job_dir_(std::move(job_dir)) {}

  void Track(const std::string& job_id);
  // The job's processes ended: what is left is shipped, then the job is forgotten.
  void Ended(const std::string& job_id);
  // New output, at most `budget` bytes in all: [{job_id, stream, offset, bytes, data (base64)}].
  nlohmann::json Collect(size_t budget);
  // The server took a report with these entries.
  void Acknowledge(const nlohmann::json& entries);

 private:
  struct Job {
    bool ended = false;
    std::map<std::string, int64_t> sent;  // stream -> bytes the server has
  };
  std::function<std::string(const std::string&)> job_dir_;
  std::mutex mu_;
  std::map<std::string, Job> jobs_;
};

}  // namespace gantry
