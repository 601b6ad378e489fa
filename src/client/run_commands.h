// The subcommands that follow jobs to their end, as srun and scontrol wait_job do: `run`
// (submit, stream the output, exit with the job's exit code; Ctrl-C cancels), `wait`
// (block until jobs end; non-zero if one did not succeed) and `logs` (with -f, it exits
// with the job's status too).
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>

#include "client/billing_commands.h"

namespace gantry {

void AddRunCommands(CLI::App& app, std::ostream& out, std::ostream& err, const ClientPlumbing& plumbing);

// The exit status a follower of a job ends with: 0 when it succeeded, its exit code
// (1..255) when it failed with one, else 1.
int ExitStatusOf(const nlohmann::json& job);

}  // namespace gantry
