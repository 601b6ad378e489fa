// `gantry token`: makes a user's (or a node agent's) token and prints it once with its
// users.yaml entry. A local command like `gantry gpus`: it asks no server, and it is
// gantryd's, so the lean `gantry` never loads OpenSSL.
#pragma once

#include <iosfwd>
#include <string>

namespace gantry {

struct TokenCommandOptions {
  std::string user;
  std::string team;
  std::string role = "user";  // user, team-admin, admin, agent or login-node
  std::string node;           // the one node an agent token speaks for
  std::string pool;           // or the pool whose autoscaled nodes it speaks for
  std::string expires;        // UTC time from which the token is refused (empty: never)
};

int RunTokenCommand(const TokenCommandOptions& options, std::ostream& out);

}  // namespace gantry
