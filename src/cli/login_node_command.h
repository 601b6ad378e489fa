// `gantry login-node`: the service of a login node (a host where many Unix users run
// gantry, as on a Slurm cluster). It listens on a local socket; a user's `gantry` without a
// token connects, the kernel tells this service who connected (SO_PEERCRED: uid, gid), and
// the service asks the server, with the host's own token (users.yaml role login-node), for
// a short-lived session of that Unix user, with the user's Unix groups for their teams. A
// user can only ever get their own account's session: the account is the kernel's word.
#pragma once

#include <csignal>
#include <iosfwd>
#include <string>

namespace gantry {

struct LoginNodeOptions {
  std::string server;      // the Gantry server (https:// in production)
  std::string token_file;  // the host's token (gantry token --role login-node)
  std::string ca_cert;     // PEM CA of an https:// server
  std::string socket = "/run/gantry/login.sock";
  std::string name;  // this host's name in audit lines (default: the host name)
};

// Serves until SIGTERM or SIGINT (blocked by the caller and taken with sigwait).
int RunLoginNode(const LoginNodeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gantry
