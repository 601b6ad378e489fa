// `gantry token`: a fresh random token and the SHA-256 users.yaml keeps of it.
#include "cli/token_command.h"

#include <fmt/format.h>

#include <ostream>

#include "core/encoding.h"

namespace gantry {

int RunTokenCommand(const TokenCommandOptions& o, std::ostream& out) {
  std::string token = NewToken();
  std::string bound = !o.node.empty() ? ", node: " + o.node : !o.pool.empty() ? ", pool: " + o.pool : "";
  out << "token (give it to " << o.user << "; it is not stored anywhere): " << token << "\n"
      << "users.yaml entry:\n"
      << fmt::format("  - {{name: {}, team: {}, role: {}{}, token_sha256: {}}}\n", o.user, o.team, o.role, bound,
                     Sha256Hex(token));
  return 0;
}

}  // namespace gantry
