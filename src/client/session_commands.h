// Interactive work, as Slurm's srun --pty / salloc and kubectl exec / attach give it:
// `gantry exec JOB -- CMD` runs a command in a running job's allocation (and container),
// on a terminal with -t; `gantry shell` allocates GPUs and opens a login shell there (the
// allocation ends with the shell); `gantry attach JOB` follows a job's output live. The
// session's stream goes through the server (the node may be unreachable from here).
#pragma once

#include <iosfwd>

#include "client/billing_commands.h"

namespace gantry {

void AddSessionCommands(CLI::App& app, std::ostream& out, std::ostream& err, const ClientPlumbing& plumbing);

}  // namespace gantry
