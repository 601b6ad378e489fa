// The client subcommands of `gantry` (submit, jobs, job, queue, cancel, nodes, drain,
// undrain, status, logs, audit, token; usage, report, budgets, alerts): each one request or a few, printed as a table,
// or as the server's JSON with -o json.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <memory>

namespace gantry {

// Adds the client subcommands to `app`. After parsing, `run()` runs the chosen one (and
// returns its exit status) or returns -1 when none of them was chosen.
struct ClientCommands {
  std::function<int()> run;
};
std::shared_ptr<ClientCommands> AddClientCommands(CLI::App& app, std::ostream& out, std::ostream& err);

}  // namespace gantry
