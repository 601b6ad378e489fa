// Where a job's output lives, the same on the node that ran it and in the server's copy:
// one file per run, rank and stream under the job's log directory
// (run-<K>/rank-<N>.<stream>.log), so ranks and runs never mix; and the job's cap on all
// of them together, which keeps the newest output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gantry {

bool IsLogStream(const std::string& stream);  // stdout or stderr
std::string RunLogDir(const std::string& job_dir, int run);
std::string RunLogPath(const std::string& job_dir, int run, int rank, const std::string& stream);

struct RunLogFile {
  int run = 0;
  int rank = 0;
  std::string stream;
  std::string path;
};
// The logs present under `job_dir`, by run, then rank, then stream; run > 0: that run only.
std::vector<RunLogFile> ListRunLogs(const std::string& job_dir, int run = 0);
// 1 + the highest rank with a log in the run (0: none).
int RunLogRanks(const std::string& job_dir, int run);

// Keeps the job's logs within `cap_bytes` in all (0: no cap): older runs' logs are dropped
// first, oldest first, then the newest run's files are cut to their part of the cap. What
// is gone is counted in each log's `.cut` file, so readers are told (LogCutBytes).
void CapJobLogs(const std::string& job_dir, int64_t cap_bytes);

}  // namespace gantry
