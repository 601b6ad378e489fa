// GET /v1/jobs/ID/logs: a piece of one run's, rank's and stream's output from the job's
// log directories (local, or what remote agents shipped), with where the next read starts.
#include <httplib.h>

#include <algorithm>
#include <filesystem>

#include "core/job_logs.h"
#include "core/log_window.h"
#include "server/http_api.h"
#include "server/http_reply.h"

namespace gantry {

void HttpApi::ServeJobLog(const nlohmann::json& job, const httplib::Request& req, httplib::Response& res) {
  std::string stream = req.has_param("stream") ? req.get_param_value("stream") : "stdout";
  if (!IsLogStream(stream)) return ReplyError(res, 400, "invalid_argument", "must be stdout or stderr", "stream");
  int64_t offset = 0, rank = 0, run = job.value("runs", 0);
  if (!IntParam(req, res, "offset", 0, INT64_MAX, &offset) || !IntParam(req, res, "rank", 0, 65535, &rank) ||
      !IntParam(req, res, "run", 1, INT32_MAX, &run)) {
    return;
  }
  if (!options_.job_log_dirs) return ReplyError(res, 404, "not_found", "this server keeps no logs");
  // "12_4" names a task: its logs are under its own job id.
  std::vector<std::string> dirs = options_.job_log_dirs(job.value("id", ""));
  int ranks = job.contains("placement") ? static_cast<int>(job["placement"].size()) : 0;
  std::string path;
  for (const std::string& dir : dirs) {
    ranks = std::max(ranks, RunLogRanks(dir, static_cast<int>(run)));
    std::string here = RunLogPath(dir, static_cast<int>(run), static_cast<int>(rank), stream);
    std::error_code missing;
    if (path.empty() && std::filesystem::exists(here, missing)) path = here;
  }
  int64_t next = offset;
  std::string chunk = path.empty() ? "" : ReadLog(path, offset, 1 << 20, &next);
  int64_t cut = path.empty() ? 0 : LogCutBytes(path);
  if (offset < cut) res.set_header("X-Log-Cut", std::to_string(cut));
  res.set_header("X-Log-Offset", std::to_string(next));
  res.set_header("X-Log-Run", std::to_string(run));
  res.set_header("X-Log-Ranks", std::to_string(std::max(ranks, 1)));
  res.set_header("X-Job-State", job.value("state", ""));
  res.set_content(chunk, "text/plain");
}

}  // namespace gantry
