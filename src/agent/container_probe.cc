// The container probe: a root tree, the runtime's command line as a job's, and the limits to
// try when the runtime's defaults fail.
#include "agent/container_probe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <sstream>

#include "core/command.h"

namespace gantry {

namespace fs = std::filesystem;

namespace {

constexpr const char* kProbeMarker = "gantry-probe-ok";

// Copies `file` to the same path under `root` (following links: the tree holds files).
bool CopyInto(const std::string& root, const std::string& file) {
  std::error_code ec;
  fs::path to = fs::path(root) / fs::path(file).relative_path();
  fs::create_directories(to.parent_path(), ec);
  fs::copy_file(file, to, fs::copy_options::overwrite_existing, ec);
  return !ec;
}

// A root tree with /bin/sh and the libraries it loads (ldd names them), or why not.
Status MakeRootTree(const std::string& root) {
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root + "/tmp", ec);
  std::string sh = fs::canonical("/bin/sh", ec).string();
  if (ec || !CopyInto(root, sh)) return Status::Internal("cannot copy /bin/sh for the container probe");
  fs::create_directories(root + "/bin", ec);
  if (sh != "/bin/sh") fs::copy_file(sh, root + "/bin/sh", fs::copy_options::overwrite_existing, ec);
  CommandRequest ask;
  ask.command = "exec ldd \"$1\"";
  ask.args = {sh};
  ask.timeout_ms = 10 * kSecondMs;
  CommandResult ldd = RunCommand(ask);
  std::istringstream lines(ldd.out);
  for (std::string line; std::getline(lines, line);) {
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
    size_t arrow = line.find("=> ");
    size_t start = arrow == std::string::npos ? line.find_first_not_of(" \t") : arrow + 3;
    if (start == std::string::npos || line[start] != '/') continue;
    std::string lib = line.substr(start, line.find(' ', start) - start);
    if (!CopyInto(root, lib)) return Status::Internal("cannot copy " + lib + " for the container probe");
  }
  return Status::Ok();
}

// The last line of what the runtime said on failure, without its "Error: " prefix.
std::string LastLine(const std::string& text) {
  std::string line = OneLineExcerpt(text.substr(text.rfind('\n', text.size() > 1 ? text.size() - 2 : 0) + 1), 300);
  return line.rfind("Error: ", 0) == 0 ? line.substr(7) : line;
}

}  // namespace

std::string ContainerProbe::Line() const {
  if (!works) return "containers: " + problem + ": container jobs are not placed on this node";
  std::string with = extra_run_options.empty() ? "" : fmt::format(" with {}", fmt::join(extra_run_options, " "));
  return fmt::format("containers: {} (a probe container ran{})", runtime, with);
}

ContainerProbe ProbeContainerRuntime(const ContainerRuntime& runtime, const std::string& work_dir, int timeout_s) {
  ContainerProbe probe;
  probe.runtime = DescribeContainerRuntime(runtime);
  if (probe.runtime.rfind("containers: ", 0) == 0) probe.runtime.erase(0, 12);
  if (probe.runtime.find("does not run here") != std::string::npos) {
    probe.problem = probe.runtime.substr(0, probe.runtime.find(':'));
    return probe;
  }
  const std::string root = work_dir + "/container-probe";
  if (Status s = MakeRootTree(root); !s.ok()) {
    probe.problem = s.message();
    return probe;
  }
  // The options a job gets, then explicit limits where the runtime cannot set the agent's.
  const std::vector<std::vector<std::string>> tries = {
      {}, {"--ulimit", "nproc=4096:4096"}, {"--ulimit", "nproc=4096:4096", "--ulimit", "nofile=1024:1024"}};
  for (const auto& extra : tries) {
    ContainerRuntime rt = runtime;
    rt.run_options.insert(rt.run_options.end(), extra.begin(), extra.end());
    std::vector<std::string> argv = ContainerRunPrefix(rt);
    for (const char* word : {"--rootfs", root.c_str(), "/bin/sh", "-c"}) argv.emplace_back(word);
    argv.push_back(fmt::format("echo {}", kProbeMarker));
    CommandRequest run;
    run.command = "exec \"$@\"";
    run.args = argv;
    run.timeout_ms = static_cast<DurationMs>(timeout_s) * kSecondMs;
    CommandResult r = RunCommand(run);
    if (r.exit_code == 0 && r.out.find(kProbeMarker) != std::string::npos) {
      probe.works = true;
      probe.extra_run_options = extra;
      break;
    }
    if (probe.problem.empty()) {
      probe.problem = fmt::format("a probe container failed ({}): {}", r.Outcome(), LastLine(r.err_tail));
    }
  }
  std::error_code ec;
  fs::remove_all(root, ec);
  if (probe.works) probe.problem.clear();
  return probe;
}

}  // namespace gantry
