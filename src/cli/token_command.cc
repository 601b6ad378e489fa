// `gantry token`: a fresh random token and the SHA-256 users.yaml keeps of it.
#include "cli/token_command.h"

#include <yaml-cpp/yaml.h>

#include <ostream>

#include "core/encoding.h"

namespace gantry {

int RunTokenCommand(const TokenCommandOptions& o, std::ostream& out) {
  std::string token = NewToken();
  // The entry is emitted, not pasted together: a name with ", role: admin" or a line break
  // in it stays one quoted value of its field.
  YAML::Emitter entry;
  entry << YAML::Flow << YAML::BeginMap;
  entry << YAML::Key << "name" << YAML::Value << o.user << YAML::Key << "team" << YAML::Value << o.team;
  entry << YAML::Key << "role" << YAML::Value << o.role;
  if (!o.node.empty()) entry << YAML::Key << "node" << YAML::Value << o.node;
  if (!o.pool.empty()) entry << YAML::Key << "pool" << YAML::Value << o.pool;
  if (!o.expires.empty()) entry << YAML::Key << "expires" << YAML::Value << o.expires;
  entry << YAML::Key << "token_sha256" << YAML::Value << Sha256Hex(token) << YAML::EndMap;
  out << "token (give it to " << o.user << "; it is not stored anywhere): " << token << "\n"
      << "users.yaml entry:\n  - " << entry.c_str() << "\n";
  return 0;
}

}  // namespace gantry
