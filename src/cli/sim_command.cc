// gantry sim: wiring between files, the simulator and its reports.
#include "cli/sim_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>

#include "core/config_dir.h"
#include "core/spec_yaml.h"
#include "sim/pod_trace.h"
#include "sim/report.h"

namespace gantry {

namespace {

// Opens `path` for writing as the kernel's protected_symlinks would: a final symlink is
// followed only when it is ours or root's (so /dev/stdout works), never one another user
// planted in a shared directory such as /tmp; the link is checked and followed through one
// descriptor, so it cannot be swapped in between. -1 with errno set when refused or failed.
int OpenForWriting(const std::string& path) {
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags | O_NOFOLLOW, 0644);
  if (fd >= 0 || errno != ELOOP) return fd;
  const int link = ::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (link < 0) return -1;
  struct stat st {};
  if (::fstat(link, &st) != 0 || !S_ISLNK(st.st_mode) || (st.st_uid != ::geteuid() && st.st_uid != 0)) {
    ::close(link);
    errno = EPERM;  // a link another user owns
    return -1;
  }
  fd = ::open(fmt::format("/proc/self/fd/{}", link).c_str(), flags, 0644);
  const int saved = errno;
  ::close(link);
  errno = saved;
  return fd;
}

// Writes a report file, saying why when it cannot (a missing directory, a full disk: the
// error of the last write or of close is checked, not lost).
bool WriteFile(const std::string& path, const std::string& content, std::ostream& err) {
  auto fail = [&](int error) {
    err << "gantry sim: cannot write " << path << ": "
        << (error == EPERM ? "it is a symbolic link another user owns" : std::strerror(error)) << "\n";
    return false;
  };
  const int fd = OpenForWriting(path);
  if (fd < 0) return fail(errno);
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      return fail(error);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return fail(errno);
  return true;
}

// Why two policies compared may come out the same: fifo and priority order a trace whose
// jobs share one priority class alike (Philly's has none).
std::vector<std::string> SameOrderNotes(const Trace& trace, const std::vector<std::string>& policies) {
  auto has = [&](const char* p) { return std::find(policies.begin(), policies.end(), p) != policies.end(); };
  if (!has("fifo") || !has("priority")) return {};
  std::set<std::string> classes;
  for (const TraceJob& job : trace.jobs) classes.insert(job.spec.priority_class);
  if (classes.size() > 1) return {};
  return {
      fmt::format("fifo and priority give the same figures here: every job of this trace has the same priority "
                  "class ({}), so priority order is submission order",
                  classes.empty() || classes.begin()->empty() ? "the default" : *classes.begin())};
}

}  // namespace

int RunSimCommand(const SimCommandOptions& options, std::ostream& out, std::ostream& err) {
  auto config = LoadConfigDir(options.config_dir);
  if (!config) {
    err << "gantry sim: " << config.status().ToString() << "\n";
    return 2;
  }
  auto nodes = LoadClusterFile(options.cluster_path, config->catalog);
  if (!nodes) {
    err << "gantry sim: " << options.cluster_path << ": " << nodes.status().ToString() << "\n";
    return 2;
  }
  TraceFormat format = options.trace_format == "csv" ? TraceFormat::kCsv : TraceFormat::kPhilly;
  auto trace = options.trace_format == "pods" ? LoadPodTrace(options.trace_path, config->catalog, options.strict)
                                              : LoadTrace(options.trace_path, format, options.strict);
  if (!trace) {
    err << "gantry sim: " << options.trace_path << ": " << trace.status().message() << "\n";
    return 2;
  }
  for (size_t i = 0; i < trace->skipped.size() && i < 5; ++i) {
    err << fmt::format("gantry sim: skipped line {}: {}\n", trace->skipped[i].line, trace->skipped[i].reason);
  }
  if (trace->skipped.size() > 5) err << fmt::format("gantry sim: ... {} rows skipped in all\n", trace->skipped.size());

  SimOptions base = options.sim;
  base.quotas = config->quotas;
  base.keep_jobs = !options.jobs_csv_path.empty();
  auto pools = LoadClusterPools(options.cluster_path, config->catalog);
  if (!pools) {
    err << "gantry sim: " << options.cluster_path << ": " << pools.status().ToString() << "\n";
    return 2;
  }
  base.autoscaler = std::move(*pools);
  if (!options.quotas_path.empty()) {
    auto quotas = QuotaConfig::LoadFile(options.quotas_path, config->catalog);
    if (!quotas) {
      err << "gantry sim: " << options.quotas_path << ": " << quotas.status().ToString() << "\n";
      return 2;
    }
    base.quotas = std::move(*quotas);
  }
  std::vector<std::string> policies = options.compare;
  if (policies.empty()) policies = {options.sim.policy};
  std::vector<PolicyRun> runs;
  for (const std::string& policy : policies) {
    SimOptions sim = base;
    sim.policy = policy;
    auto started = std::chrono::steady_clock::now();
    auto result = Simulate(*nodes, *trace, *config, sim);
    if (!result) {
      err << "gantry sim: " << result.status().ToString() << "\n";
      return 2;
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    runs.push_back({std::move(*result), wall});
  }
  out << fmt::format("{} jobs, {} rows skipped, {} GPUs on {} nodes{}\n", trace->jobs.size(), trace->skipped.size(),
                     runs.front().result.cluster_gpus, nodes->size(),
                     base.autoscaler.enabled()
                         ? fmt::format(" at the peak, with {} elastic pool(s)", base.autoscaler.pools.size())
                         : "");
  out << CompareTable(runs) << PoolTable(runs);
  std::vector<std::string> notes = SameOrderNotes(*trace, policies);
  for (const std::string& note : notes) out << "note: " << note << "\n";
  if (!options.json_path.empty()) {
    nlohmann::json doc;
    if (runs.size() == 1) {
      doc = SimResultToJson(runs.front());
    } else {
      doc["policies"] = nlohmann::json::object();
      for (const PolicyRun& run : runs) doc["policies"][run.result.policy] = SimResultToJson(run);
    }
    if (!WriteFile(options.json_path, doc.dump(2) + "\n", err)) return 1;
  }
  if (!options.jobs_csv_path.empty() && !WriteFile(options.jobs_csv_path, JobsCsv(runs), err)) return 1;
  if (!options.html_path.empty()) {
    std::string title =
        fmt::format("Gantry simulation: {} on {} GPUs", options.trace_path, runs.front().result.cluster_gpus);
    if (!WriteFile(options.html_path, RenderSimHtml(runs, title, notes), err)) return 1;
  }
  return 0;
}

}  // namespace gantry
