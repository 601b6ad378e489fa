// RunCommand: fork, a new process group, pipes for stdout and stderr read with poll until
// the deadline, then SIGTERM and SIGKILL to the group.
#include "core/command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

namespace gantry {

namespace {

constexpr size_t kErrTail = 4096;
using Steady = std::chrono::steady_clock;

DurationMs MsSince(Steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0).count();
}

[[noreturn]] void ExecChild(const CommandRequest& req, int out_fd, int err_fd) {
  ::setpgid(0, 0);
  int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  for (const auto& [k, v] : req.env) ::setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> argv;
  std::string sh = "/bin/sh", c = "-c", name = "gantry-hook";
  argv.push_back(sh.data());
  argv.push_back(c.data());
  argv.push_back(const_cast<char*>(req.command.c_str()));
  argv.push_back(name.data());
  for (const std::string& a : req.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv("/bin/sh", argv.data());
  ::_exit(127);
}

// Reads what is there on `fd` into `into`, keeping the first `cap` bytes (or, with
// `tail`, the last). False at end of file.
bool Drain(int fd, std::string& into, size_t cap, bool tail, bool* truncated) {
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  into.append(buf, static_cast<size_t>(n));
  if (into.size() > cap) {
    if (tail) {
      into.erase(0, into.size() - cap);
    } else {
      into.resize(cap);
      *truncated = true;
    }
  }
  return true;
}

}  // namespace

std::string CommandResult::Outcome() const {
  if (timed_out) return fmt::format("killed after {:.0f} s (did not finish)", static_cast<double>(took_ms) / 1000);
  if (exit_code < 0) return "could not start";
  if (exit_code > 128) return fmt::format("killed by signal {}", exit_code - 128);
  return fmt::format("exit code {}", exit_code);
}

CommandResult RunCommand(const CommandRequest& req) {
  CommandResult r;
  const auto t0 = Steady::now();
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r;
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return r;
  }
  pid_t pid = ::fork();
  if (pid == 0) ExecChild(req, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    return r;
  }
  ::setpgid(pid, pid);  // both sides set it: no race with a kill before the child ran
  const auto deadline = t0 + std::chrono::milliseconds(req.timeout_ms);
  bool out_open = true, err_open = true, ignore = false;
  while (out_open || err_open) {
    DurationMs left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now()).count();
    if (left <= 0 || (req.cancel && req.cancel->load())) {
      r.timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    int ready = ::poll(fds, 2, static_cast<int>(std::min<DurationMs>(left, req.cancel ? 100 : 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      out_open = Drain(out[0], r.out, req.max_output, false, &r.out_truncated);
    }
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      err_open = Drain(err[0], r.err_tail, kErrTail, true, &ignore);
    }
  }
  ::close(out[0]);
  ::close(err[0]);
  int status = 0;
  if (r.timed_out) {
    ::kill(-pid, SIGTERM);
    for (int i = 0; i < 20 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) ::usleep(50 * 1000);
    ::kill(-pid, SIGKILL);  // the group: whatever it started goes too
  } else {
    // Both pipes closed: it is exiting (or it closed them and runs on: the deadline holds).
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (Steady::now() >= deadline || (req.cancel && req.cancel->load())) {
        r.timed_out = true;
        ::kill(-pid, SIGKILL);
        break;
      }
      ::usleep(10 * 1000);
    }
  }
  if (r.timed_out) ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  r.took_ms = MsSince(t0);
  return r;
}

std::string OneLineExcerpt(const std::string& text, size_t max) {
  std::string s = text.substr(0, max);
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace gantry
