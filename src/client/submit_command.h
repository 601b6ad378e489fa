// `gantry submit`: one job (flags, -f job.yaml, --profile) or a jobs file, all its lines or
// none; --dry-run says what would happen now (refused and why, where it would start, or why
// it would wait) and submits nothing.
#pragma once

#include <iosfwd>

#include "client/billing_commands.h"

namespace gantry {

void AddSubmitCommand(CLI::App& app, std::ostream& out, std::ostream& err, const ClientPlumbing& plumbing);

}  // namespace gantry
