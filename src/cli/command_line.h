// The command line of every `gantry` command that runs a daemon or a local computation
// (server, agent, gpus, sim, demo): their flags and where the values go. Both binaries
// define them, so help, completion and man pages are whole in each: `gantry` (the client,
// light to start) hands these commands to `gantryd`, which runs them.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "cli/agent_command.h"
#include "cli/cli_docs.h"
#include "cli/demo.h"
#include "cli/gpus_command.h"
#include "cli/login_node_command.h"
#include "cli/server_command.h"
#include "cli/sim_command.h"
#include "cli/token_command.h"
#include "client/commands.h"
#include "client/terminal_safe.h"

namespace gantry {

struct DaemonCommands {
  DemoOptions demo;
  std::string output = "text";  // demo -o
  SimCommandOptions sim;
  double checkpoint_s = 1800;      // sim --checkpoint-interval
  double restart_overhead_s = 60;  // sim --restart-overhead
  ServerOptions server;
  bool metrics_auth = false;  // server --metrics-need-token
  bool no_fsync = false;      // server --no-fsync
  AgentOptions agent;
  GpusCommandOptions gpus;
  TokenCommandOptions token;
  LoginNodeOptions login_node;
  CLI::App* demo_cmd = nullptr;
  CLI::App* sim_cmd = nullptr;
  CLI::App* server_cmd = nullptr;
  CLI::App* agent_cmd = nullptr;
  CLI::App* gpus_cmd = nullptr;
  CLI::App* token_cmd = nullptr;
  CLI::App* login_node_cmd = nullptr;

  // Whether the parsed command line chose one of these commands (none when not defined).
  bool chosen() const {
    return demo_cmd &&
           (*demo_cmd || *sim_cmd || *server_cmd || *agent_cmd || *gpus_cmd || *token_cmd || *login_node_cmd);
  }
};

// Adds the daemon commands and their flags to `app`, their values going to `c`.
void DefineDaemonCommands(CLI::App& app, DaemonCommands& c);

// Every command of `gantry`, as both binaries parse it: the daemon commands, the client
// commands and the help, completion and man commands.
class CommandLine {
 public:
  // With `only` (a client command's name): that command alone, and help, completion and
  // man; the daemon commands and the other client commands are not defined.
  explicit CommandLine(const std::string& only = "");
  // The client's command line: only the command argv names when it is a client command
  // (a `gantry submit` in a loop then starts without defining every command's flags),
  // else every command (help, completion, man, an unknown name).
  static std::unique_ptr<CommandLine> ForClient(int argc, char** argv);
  // Parses argv (a job's command after the first "--" is never taken as options): -1 when
  // a command was chosen, else the exit status (help printed, or a parse error).
  int Parse(int argc, char** argv);
  // Runs the chosen client or docs command: its exit status, -1 when neither was chosen.
  int RunClientOrDocs();
  // Whether the chosen client command goes to an https:// server (the lean `gantry`, which
  // has no TLS, then hands it to gantryd).
  bool ClientWantsTls() const;
  DaemonCommands daemon;

 private:
  CLI::App app_{"Gantry: a GPU cluster manager for ML teams", "gantry"};
  // The client commands' stdout and stderr, through which server-held text is shown
  // TerminalSafe.
  TerminalSafeBuffer safe_out_buffer_{std::cout.rdbuf()};
  TerminalSafeBuffer safe_err_buffer_{std::cerr.rdbuf()};
  std::ostream safe_out_{&safe_out_buffer_};
  std::ostream safe_err_{&safe_err_buffer_};
  std::shared_ptr<ClientCommands> client_;
  std::function<int()> docs_;
};

// The subcommand names DefineDaemonCommands adds, and the job shim's.
bool IsDaemonCommand(const std::string& name);

}  // namespace gantry
