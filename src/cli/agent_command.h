// `gantry agent`: the node agent of a cluster. It registers this node's GPUs with the
// server, pulls its orders by long poll (so it works behind NAT and firewalls), runs jobs
// with the same runner as the standalone server, and reports job events, GPU readings and
// health. A restarted agent adopts the jobs still running; a restarted server gets the
// node's runs again when the agent re-registers.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "agent/spot_notice.h"
#include "cli/job_runner_setup.h"

namespace gantry {

struct AgentOptions {
  std::string server = "http://127.0.0.1:8080";  // or several, comma-separated: it follows the leader
  std::string token;
  std::string token_file;
  std::string node_id;     // default: the host name
  std::string ca_cert;     // PEM CA for an https:// server (else the system's CAs)
  std::string data_dir;    // job logs, checkpoints and run records
  std::string config_dir;  // gpu_types.yaml, health.yaml
  std::string fake_gpus;   // e.g. 4xT4 (or 1x4xT4): this node's GPUs are fake
  int poll_wait_s = 20;
  JobRunnerFlags runner;            // the shim, run-as, cgroups and log cap
  double heartbeat_s = 2;           // reports (a heartbeat when there is nothing else) at least this often
  std::vector<std::string> labels;  // KEY=VALUE, this node's (e.g. pool=spot-a100)
  SpotNoticeOptions spot_notice;    // where this node learns that its cloud takes it back
};

int RunAgent(const AgentOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gantry
