// Signing in from the CLI: `gantry login` (the identity provider's device authorization
// grant, through the server), `gantry logout`, `gantry whoami`, and `gantry tokens
// list|revoke` (sessions with their last use; admins see and revoke everyone's).
#pragma once

#include <CLI/CLI.hpp>
#include <iosfwd>

#include "client/billing_commands.h"

namespace gantry {

void AddLoginCommands(CLI::App& app, std::ostream& out, std::ostream& err, const ClientPlumbing& plumbing);

}  // namespace gantry
