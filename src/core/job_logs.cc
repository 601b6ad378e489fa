// Job log paths and the per-job cap.
#include "core/job_logs.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>

#include "core/log_window.h"

namespace gantry {

namespace fs = std::filesystem;

namespace {

// "run-12" -> 12; 0 when the name is not a run's directory.
int RunOfDirName(const std::string& name) {
  if (name.rfind("run-", 0) != 0) return 0;
  int run = 0;
  auto [end, ec] = std::from_chars(name.data() + 4, name.data() + name.size(), run);
  return ec == std::errc() && end == name.data() + name.size() && run > 0 ? run : 0;
}

// "rank-3.stdout.log" -> rank 3, stream stdout; false for any other name.
bool ParseRankLogName(const std::string& name, int* rank, std::string* stream) {
  if (name.rfind("rank-", 0) != 0) return false;
  const char* first = name.data() + 5;
  const char* last = name.data() + name.size();
  auto [end, ec] = std::from_chars(first, last, *rank);
  if (ec != std::errc() || end == first || *rank < 0 || *end != '.') return false;
  std::string rest(end + 1, last);
  for (const char* s : {"stdout", "stderr"}) {
    if (rest == std::string(s) + ".log") {
      *stream = s;
      return true;
    }
  }
  return false;
}

}  // namespace

bool IsLogStream(const std::string& stream) { return stream == "stdout" || stream == "stderr"; }

std::string RunLogDir(const std::string& job_dir, int run) { return job_dir + "/run-" + std::to_string(run); }

std::string RunLogPath(const std::string& job_dir, int run, int rank, const std::string& stream) {
  return RunLogDir(job_dir, run) + "/rank-" + std::to_string(rank) + "." + stream + ".log";
}

std::vector<RunLogFile> ListRunLogs(const std::string& job_dir, int run) {
  std::vector<RunLogFile> out;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(job_dir, ec)) {
    int r = RunOfDirName(dir.path().filename().string());
    if (r == 0 || (run > 0 && r != run) || !dir.is_directory(ec)) continue;
    for (const auto& file : fs::directory_iterator(dir.path(), ec)) {
      RunLogFile f{r, 0, "", file.path().string()};
      if (ParseRankLogName(file.path().filename().string(), &f.rank, &f.stream)) out.push_back(std::move(f));
    }
  }
  std::sort(out.begin(), out.end(), [](const RunLogFile& a, const RunLogFile& b) {
    return std::tie(a.run, a.rank, a.stream) < std::tie(b.run, b.rank, b.stream);
  });
  return out;
}

int RunLogRanks(const std::string& job_dir, int run) {
  int ranks = 0;
  for (const RunLogFile& f : ListRunLogs(job_dir, run)) ranks = std::max(ranks, f.rank + 1);
  return ranks;
}

void CapJobLogs(const std::string& job_dir, int64_t cap_bytes) {
  if (cap_bytes <= 0) return;
  std::vector<RunLogFile> files = ListRunLogs(job_dir);
  if (files.empty()) return;
  std::map<std::string, int64_t> sizes;
  int64_t total = 0;
  std::error_code ec;
  for (const RunLogFile& f : files) {
    auto size = fs::file_size(f.path, ec);
    sizes[f.path] = ec ? 0 : static_cast<int64_t>(size);
    total += sizes[f.path];
  }
  if (total <= cap_bytes) return;
  int newest = files.back().run;
  for (const RunLogFile& f : files) {
    if (f.run == newest || total <= cap_bytes) break;
    if (sizes[f.path] > 0 && DropLog(f.path)) total -= sizes[f.path];
  }
  if (total <= cap_bytes) return;
  int64_t in_newest = std::count_if(files.begin(), files.end(), [&](const RunLogFile& f) { return f.run == newest; });
  for (const RunLogFile& f : files) {
    if (f.run == newest) TrimLog(f.path, std::max<int64_t>(cap_bytes / in_newest, 1));
  }
}

}  // namespace gantry
