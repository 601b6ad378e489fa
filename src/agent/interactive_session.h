// The node's side of an interactive session, given its stream to the user's client and
// what the agent knows of the run: `exec` runs a command in the job's allocation (as the
// job's account, with its environment, GPUs and cgroup, or inside its container through
// the runtime's exec) on a terminal or on pipes, and relays frames (protocol/stream_frames.h)
// until it ends; `attach` follows a rank's output as it is written until the run ends. The
// client's frames can only type, resize, signal or end input.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/byte_stream.h"
#include "protocol/messages.h"

namespace gantry {

struct SessionTarget {
  std::string shim;  // the gantry binary (its job-shim switches to the account)
  std::string user;  // the job's account; empty: the agent's own
  std::map<std::string, std::string> env;
  std::string working_dir;                  // the agent's directory for the job (SpawnRequest)
  std::string job_working_dir;              // the job's own, entered with its rights; empty: none
  std::string cgroup_procs;                 // the run's cgroup.procs; empty: none
  std::vector<std::string> container_exec;  // the runtime's `exec` words up to the options; empty: no container
  std::string container;                    // the run's container name
  std::string exit_file;                    // where the shim writes the command's status
  std::string stdout_log, stderr_log;       // attach: the rank's logs
  std::string run_exit_file;                // attach: where the run's own status is written
  int port = 0;                             // port: the node's port, its name, and the job's uid
  std::string port_name;
  uid_t uid = 0;
};

// Runs the exec session to its end: the command's exit status goes to the client as the
// last frame. A client that goes away hangs the command up (SIGHUP, then SIGKILL after
// 5 s); so does `stop`. Returns the exit status (-1 when it could not start).
int RunExecSession(const StreamOrder& order, const SessionTarget& target, ByteStream& stream,
                   const std::atomic<bool>& stop);

// Follows the logs from their current end until `ended()` gives the run's exit status
// (>= -1; -2 while it runs) or the client goes away or `stop`.
void RunAttachSession(const SessionTarget& target, ByteStream& stream, const std::function<int()>& ended,
                      const std::atomic<bool>& stop);

// Tells the client why there is no session (an error frame, then exit status 126).
void RefuseSession(ByteStream& stream, const std::string& why);

// The argv of an exec: the order's command, else the account's login shell (a container's:
// bash when it has one, else sh).
std::vector<std::string> ExecArgv(const StreamOrder& order, const SessionTarget& target);

}  // namespace gantry
