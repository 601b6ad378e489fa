// `gantry server`: wires the store, controller, in-process agent (standalone) and HTTP API
// together, creates the standalone admin token, and shuts down cleanly on SIGTERM/SIGINT.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "cli/job_runner_setup.h"

namespace gantry {

// On Kubernetes (cli/server_kube.h).
struct KubeServerOptions {
  bool in_cluster = false;  // --kube: the pod's own service account and API address
  std::string api;          // --kube-api URL (outside a cluster), with ca and token_file
  std::string ca, token_file;
  std::string agents = "gantry-system/gantry-agent";  // NAMESPACE/SERVICEACCOUNT of the agents' DaemonSet
  std::string node_selector;                          // which Node objects are Gantry's ("": all)
  double token_cache_s = 60;                          // a verified agent token is trusted this long
  // The Service ([NAMESPACE/]NAME) whose Endpoints the leader points at itself ("": none),
  // this pod's IP (default: $POD_IP, else the --listen host) and name (default: $POD_NAME).
  std::string service, pod_ip, pod_name;
  // --kube-pods: pods whose schedulerName is `scheduler_name` are Gantry's to place; a
  // namespace's team (NAMESPACE=TEAM; default: the namespace's name) and a PriorityClass's
  // Gantry class (NAME=CLASS).
  bool pods = false;
  std::string scheduler_name = "gantry";
  double eviction_wait_s = 60;  // a preemption waits so long for a PodDisruptionBudget
  std::vector<std::string> namespace_teams, priority_classes;
  bool enabled() const { return in_cluster || !api.empty(); }
};

struct ServerOptions {
  std::string db;        // SQLite file; default DATA_DIR/gantry.db
  std::string data_dir;  // standalone: agent state, logs, admin token
  std::string listen = "127.0.0.1:8080";
  std::string config_dir;  // gpu_types, scheduler_config, team_quotas, users, profiles
  bool standalone = false;
  std::string fake_gpus;           // standalone: fake nodes instead of the machine's GPUs
  std::string ready_file;          // written with the bound address once serving (scripts, tests)
  bool sync_full = true;           // fsync every commit
  double history_interval_s = 60;  // a cluster sample for the dashboard's history
  // With a PostgreSQL store: a leader that stopped renewing keeps the lead this long; a
  // standby takes over within about this plus a second.
  double leader_lease_s = 8;
  double node_timeout_s = 60;             // a remote agent silent this long: its node is lost, its jobs requeue
  int http_threads = 16;                  // workers that parse requests and run handlers (waiting polls hold none)
  int max_connections = 10000;            // open connections in total
  int max_connections_per_client = 1000;  // open connections from one address
  std::string tls_cert, tls_key;          // PEM files: serve HTTPS
  std::string tls_ciphers;                // TLS 1.2 suites (OpenSSL's syntax); empty: kDefaultTlsCiphers
  int request_timeout_s = 10;             // a request must arrive whole within this
  int idle_timeout_s = 60;                // idle keep-alive connections are closed after this
  JobRunnerFlags runner;                  // standalone: the shim, run-as, cgroups; the log cap (remote logs too)
  bool open_metrics = true;               // false: /metrics needs a token too
  std::string public_url;                 // links in job notifications; empty: from --listen
  // Jobs' named ports through the server, on a listener of their own (another origin than
  // the dashboard's): HOST:PORT (empty: --listen's host, any free port; "off": none), and
  // the address browsers reach it at (empty: from the listener, on --public-url's host).
  std::string ports_listen;
  std::string ports_url;
  std::string sendmail = "/usr/sbin/sendmail";
  KubeServerOptions kube;  // on Kubernetes: agents' pod tokens, the Node watch (cli/server_kube.h)
};

int RunServer(const ServerOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gantry
