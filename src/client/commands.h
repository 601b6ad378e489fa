// The client subcommands of `gantry` (submit, jobs, job, queue, cancel, nodes, drain,
// undrain, status, logs, audit; usage, report, budgets, alerts): each one request or a few, printed as a table,
// or as the server's JSON with -o json.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace gantry {

// Adds the client subcommands to `app`. After parsing, `run()` runs the chosen one (and
// returns its exit status) or returns -1 when none of them was chosen.
struct ClientConfig;
struct ClientCommands {
  std::function<int()> run;
  // Whether a client command was chosen (run() then runs it).
  std::function<bool()> chosen;
  // The server, token and CA the flags gave (ResolveClientConfig fills in the rest).
  std::shared_ptr<ClientConfig> config;
  // The words after the first "--" on the command line (SplitAtDashes): a job's command,
  // never options, whatever comes before.
  std::shared_ptr<std::vector<std::string>> command = std::make_shared<std::vector<std::string>>();
};
// With `only` set, only the client command of that name (if it is one) is added.
std::shared_ptr<ClientCommands> AddClientCommands(CLI::App& app, std::ostream& out, std::ostream& err,
                                                  const std::string& only = "");

// Splits argv at its first "--": returns the arguments before it (what the option parser
// sees) and puts the words after it in `after`. CLI11 would otherwise let an option that
// takes several values (-t, -e) swallow the "--" and the command's own options.
std::vector<const char*> SplitAtDashes(int argc, const char* const* argv, std::vector<std::string>* after);

}  // namespace gantry
