// The subcommands that change a job after its submit: hold, release and update (Slurm's
// scontrol hold/release/update).
#pragma once

#include <iosfwd>

#include "client/billing_commands.h"

namespace gantry {

void AddJobEditCommands(CLI::App& app, std::ostream& out, const ClientPlumbing& plumbing);

}  // namespace gantry
