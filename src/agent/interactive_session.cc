// Interactive sessions on the node: the command on a pseudo-terminal or pipes, the frame
// loop, hang-up on a lost client, and following logs for attach.
#include "agent/interactive_session.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pty.h>
#include <pwd.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "agent/process.h"
#include "protocol/stream_frames.h"

namespace gantry {

namespace {

constexpr int kWriteTimeoutMs = 30000;
constexpr int kInputTimeoutMs = 5000;

int SignalNamed(const std::string& name) {
  if (name == "INT") return SIGINT;
  if (name == "TERM") return SIGTERM;
  if (name == "HUP") return SIGHUP;
  if (name == "QUIT") return SIGQUIT;
  return 0;
}

bool Send(ByteStream& stream, FrameType type, std::string_view payload) {
  return stream.WriteAll(EncodeFrame(type, payload), kWriteTimeoutMs);
}

// The process's output read so far to the client; false when the client is gone.
bool Forward(FdStream& from, ByteStream& to, FrameType type, bool* ended) {
  char buf[kMaxFramePayload];
  for (int round = 0; round < 8; ++round) {
    ssize_t n = from.ReadSome(buf, sizeof(buf));
    if (n == ByteStream::kWouldBlock) return true;
    if (n <= 0) {
      *ended = true;
      return true;
    }
    if (!Send(to, type, std::string_view(buf, static_cast<size_t>(n)))) return false;
  }
  return true;
}

// The exit status of the session's leader once it has ended, -1 while it runs. It is not
// reaped: its pid stays taken (a zombie), so the group's id can never name a process that
// reuses it while the session may still signal the group.
int ExitedStatus(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != pid) return -1;
  return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

// Ends the session's process group: a hang-up first (what a closed terminal sends), then
// SIGKILL for what is left (its background processes too) once the leader has ended or 5 s
// passed; then the leader is reaped. Returns the leader's status.
int EndGroup(pid_t pid) {
  kill(-pid, SIGHUP);
  kill(-pid, SIGCONT);
  int code = -1;
  for (int i = 0; i < 50 && (code = ExitedStatus(pid)) < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // what the hang-up lets end cleanly
  kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return code >= 0 ? code : 137;
}

}  // namespace

std::vector<std::string> ExecArgv(const StreamOrder& order, const SessionTarget& target) {
  std::vector<std::string> argv;
  if (!target.container_exec.empty()) {
    argv = target.container_exec;
    argv.push_back("-i");
    if (order.tty) {
      auto term = target.env.find("TERM");
      argv.insert(argv.end(), {"-t", "-e", "TERM=" + (term == target.env.end() ? "xterm-256color" : term->second)});
    }
    argv.push_back(target.container);
    if (order.command.empty()) {
      argv.insert(argv.end(),
                  {"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"});
    } else {
      argv.insert(argv.end(), order.command.begin(), order.command.end());
    }
    return argv;
  }
  if (!order.command.empty()) return order.command;
  // The account's shell; a service account's nologin or false (a team's shared unix_account
  // runs any command already) gives way to bash, else sh.
  std::string shell = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
  struct passwd* pw = target.user.empty() ? getpwuid(geteuid()) : getpwnam(target.user.c_str());
  if (pw && pw->pw_shell && *pw->pw_shell) {
    std::string own = pw->pw_shell;
    if (own.find("nologin") == std::string::npos && own.find("/false") == std::string::npos) shell = own;
  }
  return {shell, "-l"};
}

void RefuseSession(ByteStream& stream, const std::string& why) {
  Send(stream, FrameType::kError, why);
  Send(stream, FrameType::kExit, "126");
}

int RunExecSession(const StreamOrder& order, const SessionTarget& target, ByteStream& stream,
                   const std::atomic<bool>& stop) {
  SpawnRequest req;
  req.shim = target.shim;
  req.argv = ExecArgv(order, target);
  if (target.container_exec.empty()) {
    req.working_dir = target.working_dir;
    req.job_working_dir = target.job_working_dir;
    req.env = target.env;
    if (order.tty && !req.env.count("TERM")) req.env["TERM"] = "xterm-256color";
    req.user = target.user;
  } else {
    // The runtime's exec runs as the agent (root): none of the job's variables (a PATH
    // into the job's own files would pick the runtime) nor its directory reach it. The
    // container has its environment from its start, and TERM on the command line.
    req.working_dir = "/";
  }
  req.cgroup_procs = target.cgroup_procs;
  req.exit_file = target.exit_file;
  // The process's ends: one terminal, or three pipes (input, output, error).
  int ours[3] = {-1, -1, -1}, theirs[3] = {-1, -1, -1};
  auto close_set = [](int* set) {
    for (int i = 0; i < 3; ++i) {
      if (set[i] >= 0) close(set[i]);
      set[i] = -1;
    }
  };
  auto close_all = [&] {
    close_set(ours);
    close_set(theirs);
  };
  if (order.tty) {
    winsize ws{static_cast<unsigned short>(order.rows), static_cast<unsigned short>(order.cols), 0, 0};
    int master = -1, slave = -1;
    if (openpty(&master, &slave, nullptr, nullptr, &ws) != 0) {
      RefuseSession(stream, std::string("cannot open a terminal: ") + std::strerror(errno));
      return -1;
    }
    fcntl(master, F_SETFD, FD_CLOEXEC);
    fcntl(slave, F_SETFD, FD_CLOEXEC);
    ours[0] = master;
    theirs[0] = slave;
    req.stdio[0] = req.stdio[1] = req.stdio[2] = slave;
    req.controlling_tty = true;
  } else {
    for (int i = 0; i < 3; ++i) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) {
        close_all();
        RefuseSession(stream, std::string("cannot make pipes: ") + std::strerror(errno));
        return -1;
      }
      ours[i] = i == 0 ? p[1] : p[0];
      theirs[i] = i == 0 ? p[0] : p[1];
      req.stdio[i] = theirs[i];
    }
  }
  auto pid = SpawnJob(req);
  close_set(theirs);  // the process has its own copies
  if (!pid) {
    close_all();
    RefuseSession(stream, pid.status().message());
    return -1;
  }
  // Our ends as streams (non-blocking; a terminal's end reads EOF once the session is gone).
  FdStream input(ours[0]);
  std::unique_ptr<FdStream> output, errors;
  if (!order.tty) {
    output = std::make_unique<FdStream>(ours[1]);
    errors = std::make_unique<FdStream>(ours[2]);
  }
  FdStream& out = order.tty ? input : *output;
  bool out_ended = false, err_ended = order.tty, client_gone = false;
  int code = -1;
  FrameReader frames;
  char buf[16384];
  while (!stop.load()) {
    if (code < 0) code = ExitedStatus(*pid);
    // After the exit: what is still buffered goes out, then the status.
    if (code >= 0 && (out_ended || !WaitReadable(out, 100)) && (err_ended || !WaitReadable(*errors, 0))) break;
    pollfd p[3] = {{stream.fd(), POLLIN, 0},
                   {out.fd(), static_cast<short>(out_ended ? 0 : POLLIN), 0},
                   {errors ? errors->fd() : -1, static_cast<short>(err_ended ? 0 : POLLIN), 0}};
    if (!stream.Pending() && ::poll(p, 3, 100) < 0 && errno != EINTR) break;
    if (!out_ended && p[1].revents && !Forward(out, stream, FrameType::kStdout, &out_ended)) {
      client_gone = true;
      break;
    }
    if (!err_ended && p[2].revents && !Forward(*errors, stream, FrameType::kStderr, &err_ended)) {
      client_gone = true;
      break;
    }
    if (!(p[0].revents || stream.Pending())) continue;
    ssize_t n = stream.ReadSome(buf, sizeof(buf));
    if (n == ByteStream::kWouldBlock) continue;
    if (n <= 0) {
      client_gone = true;
      break;
    }
    frames.Feed(std::string_view(buf, static_cast<size_t>(n)));
    Frame f;
    FrameReader::Result r;
    while ((r = frames.Next(&f)) == FrameReader::Result::kFrame) {
      switch (f.type) {
        case FrameType::kStdin: input.WriteAll(f.payload, kInputTimeoutMs); break;
        case FrameType::kStdinEnd:
          if (order.tty) {
            input.WriteAll("\x04", kInputTimeoutMs);  // the terminal's end-of-file character
          } else {
            input.ShutdownWrite();
            ::close(input.Release());
          }
          break;
        case FrameType::kResize: {
          int cols = 0, rows = 0;
          if (order.tty && ParseResize(f.payload, &cols, &rows)) {
            winsize ws{static_cast<unsigned short>(rows), static_cast<unsigned short>(cols), 0, 0};
            ioctl(input.fd(), TIOCSWINSZ, &ws);
          }
          break;
        }
        case FrameType::kSignal:
          if (int sig = SignalNamed(f.payload); sig && code < 0) kill(-*pid, sig);
          break;
        default: break;  // the agent's own kinds, sent back: ignored
      }
    }
    if (r == FrameReader::Result::kBad) {
      Send(stream, FrameType::kError, "the session's frames cannot be read: " + frames.error());
      client_gone = true;
      break;
    }
  }
  if (code >= 0 && !client_gone) Send(stream, FrameType::kExit, std::to_string(code));
  // Whatever the command left in its group (background jobs) ends with the session, as a
  // Slurm step's processes do.
  int ended = EndGroup(*pid);
  if (code < 0) {  // ended from here: the job's run ended, or the agent stops
    code = ended;
    if (!client_gone) {
      Send(stream, FrameType::kError, "the session was ended with its job's run (or its node's agent stopping)");
      Send(stream, FrameType::kExit, std::to_string(code));
    }
  }
  unlink(target.exit_file.c_str());
  return code;
}

void RunAttachSession(const SessionTarget& target, ByteStream& stream, const std::function<int()>& ended,
                      const std::atomic<bool>& stop) {
  struct Followed {
    std::string path;
    FrameType type;
    off_t offset = 0;
  };
  std::vector<Followed> logs = {{target.stdout_log, FrameType::kStdout}, {target.stderr_log, FrameType::kStderr}};
  for (Followed& f : logs) {
    struct stat st {};
    if (stat(f.path.c_str(), &st) == 0) f.offset = st.st_size;  // from now on, as it is written
  }
  // Sends what was written since; false when the client is gone.
  auto pump = [&]() {
    for (Followed& f : logs) {
      int fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) continue;
      struct stat st {};
      if (fstat(fd, &st) == 0 && st.st_size < f.offset) f.offset = 0;  // cut to its cap: read anew
      char buf[kMaxFramePayload];
      for (;;) {
        ssize_t n = pread(fd, buf, sizeof(buf), f.offset);
        if (n <= 0) break;
        f.offset += n;
        if (!Send(stream, f.type, std::string_view(buf, static_cast<size_t>(n)))) {
          close(fd);
          return false;
        }
      }
      close(fd);
    }
    return true;
  };
  char buf[4096];
  for (;;) {
    // The run's end also sets `stop`: the output to its end and its status go out first.
    const bool stopping = stop.load();
    int code = ended();
    if (!pump()) return;
    if (code >= -1) {
      Send(stream, FrameType::kExit, std::to_string(code));
      return;
    }
    if (stopping) {
      Send(stream, FrameType::kError, "the session was ended: its node's agent stops");
      return;
    }
    if (WaitReadable(stream, 200, &stop)) {
      ssize_t n = stream.ReadSome(buf, sizeof(buf));  // the client's frames mean nothing here
      if (n == 0 || n == ByteStream::kBroken) return;
    }
  }
}

}  // namespace gantry
