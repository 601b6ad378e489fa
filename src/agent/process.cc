// Process spawning for jobs, and the job shim.
#include "agent/process.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/read_file.h"

extern char** environ;

namespace gantry {

namespace {

// Closes every descriptor from `first` on (after fork, before exec: async-signal-safe).
void CloseFrom(int first) {
  if (syscall(SYS_close_range, first, ~0U, 0) == 0) return;
  for (int fd = first; fd < 65536; ++fd) close(fd);  // kernels before 5.9
}

constexpr char kPathVariable[] = "PATH=/usr/local/bin:/usr/bin:/bin";
constexpr const char* kDefaultPath = kPathVariable + 5;  // the value alone
constexpr int kShimEnvFd = 3;

// The job's environment as NUL-separated K=V, in a memory file the shim reads on fd 3.
int JobEnvironmentFile(const SpawnRequest& req) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    // Another account gets none of the agent's variables but the locale and time zone.
    if (req.user.empty() || key == "LANG" || key == "LC_ALL" || key == "TZ") env[key] = kv.substr(eq + 1);
  }
  if (!req.user.empty()) env["PATH"] = kDefaultPath;
  for (const auto& [k, v] : req.env) env[k] = v;
  std::string block;
  for (const auto& [k, v] : env) block += k + "=" + v + '\0';
  int fd = memfd_create("gantry-job-env", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < block.size()) {
    ssize_t n = ::write(fd, block.data() + done, block.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

}  // namespace

Expected<pid_t> SpawnJob(const SpawnRequest& req) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  // The shim itself (root on a root agent) gets a bare environment: nothing of the job's.
  std::vector<std::string> env_strings;
  env_strings.emplace_back(kPathVariable);
  for (const char* keep : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
    if (const char* v = std::getenv(keep)) env_strings.push_back(std::string(keep) + "=" + v);
  }
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {req.shim, "job-shim", "--exit-file", req.exit_file};
  if (!req.user.empty()) args.insert(args.end(), {"--user", req.user});
  if (!req.job_working_dir.empty()) args.insert(args.end(), {"--workdir", req.job_working_dir});
  args.insert(args.end(), {"--env-fd", std::to_string(kShimEnvFd), "--"});
  if (req.argv.empty()) {
    args.insert(args.end(), {"/bin/sh", "-c", req.command});
  } else {
    args.insert(args.end(), req.argv.begin(), req.argv.end());
  }
  int env_fd = JobEnvironmentFile(req);
  if (env_fd < 0) return Status::Internal(std::string("cannot pass the job's environment: ") + std::strerror(errno));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string chdir_error = "gantry: cannot enter the working directory " + req.working_dir + "\n";
  std::string cgroup_error = "gantry: cannot join the job's cgroup " + req.cgroup_procs + "\n";

  // Logs are the agent's (0600, never through a link): the job writes them through the
  // descriptors it inherits, and people read them through the API.
  const bool given = req.stdio[0] >= 0;
  int out = given ? fcntl(req.stdio[1], F_DUPFD_CLOEXEC, 3)
                  : open(req.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  int err = given ? fcntl(req.stdio[2], F_DUPFD_CLOEXEC, 3)
                  : open(req.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  int devnull = given ? fcntl(req.stdio[0], F_DUPFD_CLOEXEC, 3) : open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || err < 0 || devnull < 0) {
    std::string why = std::strerror(errno);
    for (int fd : {out, err, devnull, env_fd}) {
      if (fd >= 0) close(fd);
    }
    return Status::Internal("cannot open job logs: " + why);
  }
  // The child's end closes on exec: when the parent reads EOF, the child has its own
  // session and process group, so a stop sent at once reaches the whole group.
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    for (int fd : {out, err, devnull, env_fd}) close(fd);
    return Status::Internal(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out, err, devnull, env_fd, ready[0], ready[1]}) close(fd);
    return Status::Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(ready[0]);
    setsid();
    dup2(devnull, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (req.controlling_tty) ioctl(0, TIOCSCTTY, 0);
    // fd 3 (open across the exec) carries the job's environment to the shim.
    if (env_fd == kShimEnvFd) {
      fcntl(env_fd, F_SETFD, 0);
    } else if (dup2(env_fd, kShimEnvFd) < 0) {
      _exit(127);
    }
    if (chdir(req.working_dir.c_str()) != 0) {  // the agent's own directory for the job
      ssize_t ignored = write(2, chdir_error.data(), chdir_error.size());
      (void)ignored;
      _exit(127);
    }
    if (!req.cgroup_procs.empty()) {
      // Into the job's cgroup before anything of the job runs: all it starts stays there.
      int fd = open(req.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) {
        ssize_t ignored = write(2, cgroup_error.data(), cgroup_error.size());
        (void)ignored;
        _exit(127);
      }
      close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Nothing of the agent's reaches the job but its input, output and environment: not a
    // server's client connections (an in-process agent) nor any descriptor it inherited.
    CloseFrom(kShimEnvFd + 1);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  for (int fd : {out, err, devnull, env_fd, ready[1]}) close(fd);
  char byte;
  while (read(ready[0], &byte, 1) < 0 && errno == EINTR) {
  }
  close(ready[0]);
  return pid;
}

namespace {
volatile sig_atomic_t g_term_before_child = 0;
void NoteTerm(int) { g_term_before_child = 1; }
}  // namespace

namespace {

// Writes the exit status atomically (a reader sees no file or the whole status); returns it.
int WriteExitFile(const std::string& exit_file, int code) {
  std::string tmp = exit_file + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << code << "\n";
    f.flush();
    if (!f) return 2;
  }
  int fd = open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  std::rename(tmp.c_str(), exit_file.c_str());
  return code;
}

}  // namespace

namespace {

// Reads NUL-separated K=V from `fd` (closed afterwards).
std::vector<std::string> ReadEnvironmentBlock(int fd) {
  std::vector<std::string> vars;
  if (fd < 0) return vars;
  std::string block, chunk(65536, '\0');
  for (;;) {
    ssize_t n = read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    block.append(chunk, 0, static_cast<size_t>(n));
  }
  close(fd);
  size_t start = 0;
  for (size_t end; (end = block.find('\0', start)) != std::string::npos; start = end + 1) {
    if (end > start) vars.push_back(block.substr(start, end - start));
  }
  return vars;
}

}  // namespace

int JobShimMain(int argc, char** argv) {
  if (argc < 5 || std::strcmp(argv[1], "job-shim") != 0) return -1;
  std::string exit_file, user, working_dir;
  int env_fd = -1;
  int i = 2;
  for (; i + 1 < argc && std::strcmp(argv[i], "--") != 0; i += 2) {
    std::string flag = argv[i];
    if (flag == "--exit-file") {
      exit_file = argv[i + 1];
    } else if (flag == "--user") {
      user = argv[i + 1];
    } else if (flag == "--workdir") {
      working_dir = argv[i + 1];
    } else if (flag == "--env-fd") {
      env_fd = std::atoi(argv[i + 1]);
    } else {
      return -1;
    }
  }
  if (exit_file.empty() || i >= argc || std::strcmp(argv[i], "--") != 0) return -1;
  return RunJobShim(exit_file, user, working_dir, env_fd, std::vector<std::string>(argv + i + 1, argv + argc));
}

int RunJobShim(const std::string& exit_file, const std::string& user, const std::string& working_dir, int env_fd,
               const std::vector<std::string>& argv) {
  if (argv.empty()) return 2;
  std::vector<std::string> job_env = ReadEnvironmentBlock(env_fd);
  // The account is looked up before the fork; the child only switches to it.
  struct passwd* pw = nullptr;
  std::string home;
  if (!user.empty()) {
    pw = getpwnam(user.c_str());
    if (!pw) {
      std::fprintf(stderr, "gantry: no Unix user '%s' on this node\n", user.c_str());
      return WriteExitFile(exit_file, 126);
    }
    home = pw->pw_dir;
  }
  uid_t uid = pw ? pw->pw_uid : 0;
  gid_t gid = pw ? pw->pw_gid : 0;
  // The shim outlives a SIGTERM to the group (the job decides how to end); SIGKILL ends
  // both. A SIGTERM that comes before the job exists is passed on to it once it does.
  struct sigaction note {};
  note.sa_handler = NoteTerm;
  sigaction(SIGTERM, &note, nullptr);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  // SIGTERM is blocked across the fork: the child unblocks it with the default action (a
  // SIGTERM sent to the group after the fork ends it); one that was pending in the shim
  // at the fork (not inherited) or came before it is passed on.
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, &old);
  pid_t child = fork();
  if (child < 0) return 2;
  if (child == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);  // the agent ignores it; a job's pipelines need the default
    sigprocmask(SIG_SETMASK, &old, nullptr);
    if (!user.empty()) {
      // Groups first, then the group, then the user: after setuid nothing else may change.
      if (initgroups(user.c_str(), gid) != 0 || setgid(gid) != 0 || setuid(uid) != 0 || getuid() != uid) {
        std::fprintf(stderr, "gantry: cannot run as %s: %s\n", user.c_str(), std::strerror(errno));
        _exit(126);
      }
    }
    // Only now, as the job's user, its working directory (so a directory the user may not
    // reach, below another's private one, is not entered on root's rights) and its
    // environment. One it may not enter (the submitter's own directory, private to the job's
    // account) is left for /tmp with a line saying so, as Slurm's job steps do.
    if (!working_dir.empty() && chdir(working_dir.c_str()) != 0) {
      std::fprintf(stderr, "gantry: cannot enter the working directory %s: %s; running in /tmp instead\n",
                   working_dir.c_str(), std::strerror(errno));
      if (chdir("/tmp") != 0) _exit(127);
    }
    if (env_fd >= 0) {
      clearenv();
      for (const std::string& kv : job_env) putenv(const_cast<char*>(kv.c_str()));
    }
    if (!user.empty()) {
      setenv("HOME", home.c_str(), 1);
      setenv("USER", user.c_str(), 1);
      setenv("LOGNAME", user.c_str(), 1);
    }
    umask(077);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    // A command that cannot run says why on its own stderr (a session's, or the job's log).
    std::fprintf(stderr, "gantry: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  sigset_t pending;
  sigpending(&pending);
  bool pass_on = g_term_before_child || sigismember(&pending, SIGTERM);
  signal(SIGTERM, SIG_IGN);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  if (pass_on) kill(child, SIGTERM);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WriteExitFile(exit_file, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

TimeMs FileMtimeMs(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return -1;
  return static_cast<TimeMs>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

int ReadExitFile(const std::string& path) {
  auto text = ReadFileNoThrow(path, 64);
  if (!text || text->empty()) return -1;
  int code = -1;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), code);
  return ec == std::errc() && end != text->data() ? code : -1;
}

sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

int64_t SessionRssMib(pid_t session) {
  static const int64_t page_kib = sysconf(_SC_PAGESIZE) / 1024;
  int64_t pages = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    // The process may exit between the listing and the read: then it holds no memory.
    std::string stat = ReadFileNoThrow(entry.path() / "stat").value_or("");
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    // After the command: state ppid pgrp session ... rss is the 22nd field after it.
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    int64_t sid = -1, rss = 0;
    for (int i = 0; i < 22 && rest >> field; ++i) {
      if (i == 3) sid = std::atoll(field.c_str());
      if (i == 21) rss = std::atoll(field.c_str());
    }
    if (sid == session) pages += rss;
  }
  return pages * page_kib / 1024;
}

bool IsLiveShim(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  // A zombie has an empty cmdline, and one that exits while read has none: it has ended.
  std::string cmdline = ReadFileNoThrow("/proc/" + std::to_string(pid) + "/cmdline").value_or("");
  return cmdline.find("job-shim") != std::string::npos;
}

}  // namespace gantry
