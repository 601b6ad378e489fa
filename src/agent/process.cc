// Process spawning for jobs, and the job shim.
#include "agent/process.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace gantry {

Expected<pid_t> SpawnJob(const SpawnRequest& req) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : req.env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {req.shim, "job-shim", "--exit-file", req.exit_file};
  if (!req.user.empty()) args.insert(args.end(), {"--user", req.user});
  args.insert(args.end(), {"--", "/bin/sh", "-c", req.command});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string chdir_error = "gantry: cannot enter the working directory " + req.working_dir + "\n";
  std::string cgroup_error = "gantry: cannot join the job's cgroup " + req.cgroup_procs + "\n";

  int out = open(req.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  int err = open(req.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || err < 0 || devnull < 0) {
    std::string why = std::strerror(errno);
    for (int fd : {out, err, devnull}) {
      if (fd >= 0) close(fd);
    }
    return Status::Internal("cannot open job logs: " + why);
  }
  // The child's end closes on exec: when the parent reads EOF, the child has its own
  // session and process group, so a stop sent at once reaches the whole group.
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    for (int fd : {out, err, devnull}) close(fd);
    return Status::Internal(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out, err, devnull, ready[0], ready[1]}) close(fd);
    return Status::Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(ready[0]);
    setsid();
    dup2(devnull, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (chdir(req.working_dir.c_str()) != 0) {
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
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  for (int fd : {out, err, devnull, ready[1]}) close(fd);
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

int RunJobShim(const std::string& exit_file, const std::string& user, const std::vector<std::string>& argv) {
  if (argv.empty()) return 2;
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
    sigprocmask(SIG_SETMASK, &old, nullptr);
    if (!user.empty()) {
      // Groups first, then the group, then the user: after setuid nothing else may change.
      if (initgroups(user.c_str(), gid) != 0 || setgid(gid) != 0 || setuid(uid) != 0 || getuid() != uid) {
        std::fprintf(stderr, "gantry: cannot run as %s: %s\n", user.c_str(), std::strerror(errno));
        _exit(126);
      }
      setenv("HOME", home.c_str(), 1);
      setenv("USER", user.c_str(), 1);
      setenv("LOGNAME", user.c_str(), 1);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
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
  std::ifstream f(path);
  int code = -1;
  if (!(f >> code)) return -1;
  return code;
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
    std::ifstream f(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
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
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
  std::stringstream buf;
  buf << f.rdbuf();
  std::string cmdline = buf.str();
  // A zombie has an empty cmdline: it has ended.
  return cmdline.find("job-shim") != std::string::npos;
}

}  // namespace gantry
