// gantryd: the full binary, with a subcommand per role: server, agent, gpus, sim, demo, the
// client commands, and the hidden job-shim the agent runs jobs under. `gantry` (the client)
// hands it the daemon commands.
#include <csignal>
#include <iostream>

#include "agent/process.h"
#include "cli/command_line.h"
#include "client/http_client.h"
#include "net/stream_upgrade_tls.h"
#include "net/tls_http_connection.h"

int main(int argc, char** argv) {
  // The job shim is parsed by hand: everything after "--" is the job's argv, untouched.
  if (int shim = gantry::JobShimMain(argc, argv); shim >= 0) return shim;
  // A server that answers early and closes must not kill a client with SIGPIPE (cpp-httplib
  // writes without MSG_NOSIGNAL). After the shim: jobs keep the default.
  signal(SIGPIPE, SIG_IGN);
  gantry::SetTlsConnector(gantry::ConnectTls);                // the client commands' https:// calls
  gantry::SetTlsStreamOpener(gantry::OpenUpgradedTlsStream);  // and their sessions (gantry exec)
  gantry::CommandLine line;
  if (int rc = line.Parse(argc, argv); rc >= 0) return rc;
  gantry::DaemonCommands& c = line.daemon;
  if (*c.agent_cmd) return gantry::RunAgent(c.agent, std::cout, std::cerr);
  if (*c.gpus_cmd) return gantry::RunGpusCommand(c.gpus, std::cout, std::cerr);
  if (*c.token_cmd) return gantry::RunTokenCommand(c.token, std::cout);
  if (*c.login_node_cmd) return gantry::RunLoginNode(c.login_node, std::cout, std::cerr);
  if (*c.server_cmd) {
    c.server.sync_full = !c.no_fsync;
    c.server.open_metrics = !c.metrics_auth;
    return gantry::RunServer(c.server, std::cout, std::cerr);
  }
  if (int rc = line.RunClientOrDocs(); rc >= 0) return rc;
  if (*c.sim_cmd) {
    c.sim.sim.restart_overhead_ms = static_cast<gantry::DurationMs>(c.restart_overhead_s * 1000);
    c.sim.sim.default_checkpoint_interval_ms = static_cast<gantry::DurationMs>(c.checkpoint_s * 1000);
    return gantry::RunSimCommand(c.sim, std::cout, std::cerr);
  }
  if (*c.demo_cmd) {
    c.demo.json = c.output == "json";
    return gantry::RunDemo(c.demo, std::cout, std::cerr);
  }
  return 0;
}
