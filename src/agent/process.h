// Starting a job's process the way the agent needs it: in its own session and process
// group (so a signal reaches everything it started), with its environment, working
// directory and log files, under a small shim (`gantry job-shim`) that survives the
// agent and writes the exit status to a file, so a restarted agent can adopt it.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace gantry {

struct SpawnRequest {
  std::string shim;               // path of the gantry binary
  std::string command;            // run by /bin/sh -c (unless argv is given)
  std::vector<std::string> argv;  // run as it is instead (a container runtime's command line)
  std::string working_dir;        // the agent's (the job's own work directory): must exist
  // The job's `working_dir` as its user gave it: entered after the switch to `user`, with
  // the job's rights (never root's: a path below another account's private directory
  // fails); empty: the job stays in `working_dir`.
  std::string job_working_dir;
  // The job's variables. With `user` (another account) the job starts from a clean
  // environment (PATH, LANG, TZ) plus these; else from the agent's own plus these.
  std::map<std::string, std::string> env;
  std::string stdout_path;   // appended
  std::string stderr_path;   // appended
  std::string exit_file;     // the shim writes the exit status here
  std::string user;          // run the command as this Unix user (the agent is root)
  std::string cgroup_procs;  // the job's cgroup.procs: the shim joins it before exec
  // An interactive session's command: its standard input, output and error are these
  // descriptors (the logs and /dev/null are not opened), and with `controlling_tty` the
  // first is a terminal that becomes the new session's controlling terminal.
  int stdio[3] = {-1, -1, -1};
  bool controlling_tty = false;
};

// Starts the shim (which starts the command); returns the shim's pid, which is also the
// process group id.
Expected<pid_t> SpawnJob(const SpawnRequest& req);

// The shim's main: runs argv (after "--") as a child, ignores SIGTERM/SIGINT/SIGHUP itself,
// waits, writes the exit status (the code, or 128 + signal) atomically to `exit_file`.
// The shim runs with a bare environment; the job's comes on `env_fd` (NUL-separated
// K=V) and is applied in the child only after it switched to `user` (its groups, HOME,
// USER, LOGNAME), so no variable of the job acts on a root process; the child enters
// `working_dir` then too (exit 127 when it cannot). The shim itself stays
// root to write the exit file. The child's umask is 077: a job's files are its own.
int RunJobShim(const std::string& exit_file, const std::string& user, const std::string& working_dir, int env_fd,
               const std::vector<std::string>& argv);

// `gantry job-shim --exit-file F [--user NAME] [--env-fd N] -- ARGV...`: the shim's exit
// code, or -1 when argv is not a shim invocation.
int JobShimMain(int argc, char** argv);

// Reads an exit file: the status, or -1 when it is not there (yet).
int ReadExitFile(const std::string& path);
// Resident memory (MiB) of every process in the session led by `session` (a job's shim,
// its job and everything the job started), from /proc.
int64_t SessionRssMib(pid_t session);
// A file's modification time in ms since the epoch; -1 when it cannot be read.
TimeMs FileMtimeMs(const std::string& path);

// True when `pid` is alive and is a gantry job shim (not a recycled pid).
bool IsLiveShim(pid_t pid);

// For daemons: blocks SIGTERM and SIGINT in this thread and the threads it starts (a
// waiting thread takes them with sigwait), and ignores SIGPIPE. Returns the blocked set.
sigset_t BlockStopSignals();

}  // namespace gantry
