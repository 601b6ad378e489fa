// The daemon commands' flags (moved here from main.cc so both binaries define them alike).
#include "cli/command_line.h"

#include <algorithm>
#include <iostream>

#include "cli/cli_docs.h"
#include "client/http_client.h"
#include "client/slurm_hints.h"
#include "core/time.h"
#include "sim/policy.h"

namespace gantry {

namespace {

// The job runner's flags, the same on `gantry server` (standalone) and `gantry agent`.
void AddJobRunnerFlags(CLI::App* cmd, JobRunnerFlags& runner) {
  cmd->add_option("--run-jobs-as", runner.run_jobs_as,
                  "When root, run jobs as: user or auto (the submitting user, else the team's unix_account, else "
                  "the job fails), agent (root itself); root only for teams with allow_root")
      ->check(CLI::IsMember({"auto", "user", "agent"}));
  cmd->add_option("--min-job-uid", runner.min_job_uid,
                  "When root, a submitting user's own Unix account below this uid (a system account) runs no "
                  "job; a team's unix_account is exempt")
      ->default_str(std::to_string(runner.min_job_uid))
      ->check(CLI::Range(int64_t{1}, int64_t{4294967294}));
  cmd->add_option("--job-cgroups", runner.job_cgroups,
                  "Each job in its own cgroup v2 with its CPU and memory limits: auto (when root and the machine "
                  "allows it), required, off")
      ->check(CLI::IsMember({"auto", "required", "off"}));
  cmd->add_option("--max-log-mb", runner.max_log_mb,
                  "Each job's logs, all runs and ranks together, keep their newest part up to this (MiB; older "
                  "runs go first)")
      ->check(CLI::Range(0.01, 1e6));
  cmd->add_option("--address", runner.address,
                  "How other nodes and users reach this node's jobs: a gang's MASTER_ADDR, the host of job port "
                  "URLs (default: the host name)");
  cmd->add_option("--ports", runner.ports, "TCP ports this node lends to jobs (MASTER_PORT, named ports)")
      ->default_str(runner.ports);
  cmd->add_option("--container-runtime", runner.container_runtime,
                  "The OCI runtime command for jobs with a container_image (podman's run flags)")
      ->default_str(runner.container_runtime);
  cmd->add_option("--container-runtime-options", runner.container_runtime_options,
                  "Options before `run`, e.g. '--runtime runc --cgroup-manager cgroupfs'");
  cmd->add_option("--container-run-options", runner.container_run_options,
                  "Options after `run`, e.g. '--ulimit nproc=4096:4096' where the node refuses the agent's own "
                  "limits inside a container");
}

}  // namespace

bool IsDaemonCommand(const std::string& name) {
  return name == "server" || name == "agent" || name == "gpus" || name == "sim" || name == "demo" || name == "token" ||
         name == "job-shim";
}

namespace {

void DefineLoginNodeCommand(CLI::App& app, DaemonCommands& c) {
  LoginNodeOptions& o = c.login_node;
  c.login_node_cmd = app.add_subcommand(
      "login-node", "Serve a login node: its users' gantry gets them a session of their own Unix account, no token");
  c.login_node_cmd->add_option("--server", o.server, "The Gantry server (or GANTRY_SERVER)");
  c.login_node_cmd->add_option("--token-file", o.token_file, "This host's token (gantry token --role login-node)")
      ->required()
      ->check(CLI::ExistingFile);
  c.login_node_cmd->add_option("--ca-cert", o.ca_cert, "PEM CA certificate that signed the server's (https://)")
      ->check(CLI::ExistingFile);
  c.login_node_cmd->add_option("--socket", o.socket, "The local socket users' gantry asks")->default_str(o.socket);
}

}  // namespace

void DefineDaemonCommands(CLI::App& app, DaemonCommands& c) {
  DemoOptions& demo = c.demo;
  std::string& output = c.output;
  SimCommandOptions& sim = c.sim;
  double& checkpoint_s = c.checkpoint_s;
  double& restart_overhead_s = c.restart_overhead_s;
  ServerOptions& server = c.server;
  bool& metrics_auth = c.metrics_auth;
  bool& no_fsync = c.no_fsync;
  AgentOptions& agent = c.agent;
  GpusCommandOptions& gpus = c.gpus;
  CLI::App*& demo_cmd = c.demo_cmd;
  CLI::App*& sim_cmd = c.sim_cmd;
  CLI::App*& server_cmd = c.server_cmd;
  CLI::App*& agent_cmd = c.agent_cmd;
  CLI::App*& gpus_cmd = c.gpus_cmd;

  demo_cmd = app.add_subcommand("demo", "Run the scheduler over an example cluster and job scenario");
  demo_cmd->add_option("--cluster", demo.cluster_path, "Cluster YAML (node_groups)")
      ->required()
      ->check(CLI::ExistingFile);
  demo_cmd->add_option("--scenario", demo.scenario_path, "Scenario YAML (start, waves of jobs)")
      ->required()
      ->check(CLI::ExistingFile);
  demo_cmd->add_option("--config", demo.config_dir, "Config directory (default: built-in defaults)");
  demo_cmd->add_option("-o,--output", output, "text or json")->check(CLI::IsMember({"text", "json"}));

  sim_cmd = app.add_subcommand("sim", "Replay a job trace through the scheduler on a simulated cluster");
  sim_cmd->add_option("--cluster", sim.cluster_path, "Cluster YAML (node_groups)")
      ->required()
      ->check(CLI::ExistingFile);
  sim_cmd->add_option("--trace", sim.trace_path, "Trace file")->required()->check(CLI::ExistingFile);
  sim_cmd->add_option("--trace-format", sim.trace_format, "philly, csv or pods (kubectl get pods -A -o json)")
      ->check(CLI::IsMember({"philly", "csv", "pods"}));
  sim_cmd->add_option("--policy", sim.sim.policy, "Scheduling policy")->check(CLI::IsMember(PolicyNames()));
  sim_cmd->add_option("--compare", sim.compare, "Several policies, one table")
      ->delimiter(',')
      ->check(CLI::IsMember(PolicyNames()));
  sim_cmd->add_option("--config", sim.config_dir, "Config directory (default: built-in defaults)");
  sim_cmd->add_option("--seed", sim.sim.seed, "Seed for estimate noise");
  sim_cmd->add_option("--quotas", sim.quotas_path, "Team quotas YAML (guarantees, limits, fair-share weights)")
      ->check(CLI::ExistingFile);
  sim_cmd
      ->add_option("--checkpoint-interval", checkpoint_s,
                   "Seconds between checkpoints for jobs whose trace gives none (0: none)")
      ->check(CLI::Range(0.0, 1e7));
  sim_cmd->add_option("--json", sim.json_path, "Write the metrics as JSON");
  sim_cmd->add_option("--html", sim.html_path, "Write a self-contained HTML report");
  sim_cmd->add_option("--jobs-csv", sim.jobs_csv_path,
                      "Write one CSV row per job (and policy): submit, first start, end, delay, JCT, evictions");
  sim_cmd->add_flag("--strict", sim.strict, "A malformed trace row is fatal");
  sim_cmd->add_flag("--scale-by-gpu-speed", sim.sim.scale_by_gpu_speed, "Scale run times by relative GPU speed");
  sim_cmd->add_option("--restart-overhead", restart_overhead_s, "Seconds a preempted job pays to restart")
      ->check(CLI::Range(0.0, 86400.0));
  sim_cmd->add_option("--estimate-error", sim.sim.estimate_error, "Runtime estimate noise e: duration x U(1-e,1+e)")
      ->check(CLI::Range(0.0, 0.99));
  sim_cmd->add_flag(
      "--no-estimates", sim.sim.no_estimates,
      "Jobs give no run-time estimate: plan with predictions from finished jobs alike, else the time limit");

  server_cmd = app.add_subcommand("server", "Run the controller (REST API, scheduler, store)");
  server_cmd->add_option("--db", server.db,
                         "SQLite database file (default DATA_DIR/gantry.db), or a PostgreSQL URL "
                         "postgresql://USER[:PASSWORD]@HOST[:PORT]/DB");
  server_cmd->add_option("--data-dir", server.data_dir, "Standalone state: job logs, admin token")
      ->default_str(DefaultDataDir());
  server_cmd->add_option("--listen", server.listen, "HOST:PORT (port 0: any free port)")->default_str(server.listen);
  server_cmd->add_option("--config", server.config_dir,
                         "Config directory: gpu_types, scheduler_config, team_quotas, users, identity (.yaml)");
  server_cmd->add_flag("--standalone", server.standalone, "Run jobs on this machine with an in-process agent");
  server_cmd->add_option("--fake-gpus", server.fake_gpus, "Standalone without GPUs: e.g. 2x8xA100-80GB,1x4xT4");
  server_cmd->add_option("--ready-file", server.ready_file,
                         "Write the URL it serves at (http://HOST:PORT) here once serving");
  server_cmd
      ->add_option("--leader-lease", server.leader_lease_s,
                   "PostgreSQL store: seconds a silent leader keeps the lead before a standby takes over")
      ->check(CLI::Range(1.0, 600.0))
      ->default_str("8");
  server_cmd->add_option("--node-timeout", server.node_timeout_s, "Seconds without a heartbeat before a node is lost")
      ->check(CLI::Range(0.5, 86400.0));
  server_cmd
      ->add_option("--history-interval", server.history_interval_s,
                   "Seconds between the cluster samples the dashboard's charts are drawn from (0: none)")
      ->check(CLI::Range(0.0, 86400.0));
  AddJobRunnerFlags(server_cmd, server.runner);
  server_cmd->add_option("--tls-cert", server.tls_cert, "PEM certificate chain: serve HTTPS (with --tls-key)")
      ->check(CLI::ExistingFile);
  server_cmd->add_option("--tls-key", server.tls_key, "PEM private key of --tls-cert")->check(CLI::ExistingFile);
  server_cmd->add_option("--tls-ciphers", server.tls_ciphers,
                         "TLS 1.2 cipher suites, in OpenSSL's syntax (default: forward-secret AEAD suites only)");
  server_cmd->add_option("--http-workers", server.http_threads, "Threads that parse requests and run handlers")
      ->check(CLI::Range(1, 1024));
  server_cmd->add_option("--max-connections", server.max_connections, "Open connections at most")
      ->check(CLI::Range(1, 1000000));
  server_cmd
      ->add_option("--max-connections-per-client", server.max_connections_per_client,
                   "Open connections from one client address at most")
      ->check(CLI::Range(1, 1000000));
  server_cmd
      ->add_option("--request-timeout", server.request_timeout_s,
                   "Seconds a request's line, headers and body have to arrive")
      ->check(CLI::Range(1, 3600));
  server_cmd->add_option("--idle-timeout", server.idle_timeout_s, "Seconds an idle keep-alive connection is kept")
      ->check(CLI::Range(1, 86400));
  server_cmd->add_option("--public-url", server.public_url,
                         "The server's address as users reach it: links in notifications, the sign-in's redirect URI "
                         "(default: --listen; for sign-in, the request's Host)");
  server_cmd->add_option("--ports-listen", server.ports_listen,
                         "HOST:PORT of the listener serving jobs' named ports at /jobs/ID/ports/NAME/ (another "
                         "origin than the dashboard's; default: --listen's host, any free port; off: none)");
  server_cmd->add_option("--ports-url", server.ports_url,
                         "The port listener's address as users reach it (default: from --ports-listen, on "
                         "--public-url's host); must not be the dashboard's own origin");
  server_cmd->add_option("--sendmail", server.sendmail, "Program job notification mail goes through")
      ->default_str(server.sendmail);
  server_cmd->add_flag("--metrics-need-token", metrics_auth, "/metrics answers only with a bearer token");
  server_cmd->add_flag("--kube", server.kube.in_cluster,
                       "On Kubernetes, with the pod's service account: agents register with their pods' tokens, "
                       "Node objects' labels, taints and cordons reach Gantry's nodes (docs/KUBERNETES.md)");
  server_cmd->add_option("--kube-api", server.kube.api, "The Kubernetes API's https:// URL (outside a cluster)");
  server_cmd->add_option("--kube-ca", server.kube.ca, "CA bundle of --kube-api")->check(CLI::ExistingFile);
  server_cmd->add_option("--kube-token-file", server.kube.token_file, "Bearer token for --kube-api")
      ->check(CLI::ExistingFile);
  server_cmd
      ->add_option("--kube-agents", server.kube.agents, "NAMESPACE/SERVICEACCOUNT whose pods' tokens are node agents'")
      ->default_str(server.kube.agents);
  server_cmd
      ->add_option("--kube-token-cache", server.kube.token_cache_s,
                   "Seconds a node agent's verified Kubernetes token is trusted before the API server is asked again")
      ->check(CLI::Range(0.1, 3600.0));
  server_cmd->add_option("--kube-node-selector", server.kube.node_selector,
                         "Label selector of the Node objects that are Gantry's (default: all)");
  server_cmd->add_flag("--kube-pods", server.kube.pods,
                       "Schedule the pods whose schedulerName is --kube-scheduler-name: bind them, say why they wait, "
                       "preempt and bill them (docs/KUBERNETES.md)");
  server_cmd->add_option("--kube-scheduler-name", server.kube.scheduler_name, "The schedulerName of Gantry's pods")
      ->default_str(server.kube.scheduler_name);
  server_cmd
      ->add_option("--kube-eviction-wait", server.kube.eviction_wait_s,
                   "Seconds a preempted pod's eviction may wait for its PodDisruptionBudget before the pod is "
                   "deleted all the same")
      ->default_str("60")
      ->check(CLI::Range(0.0, 86400.0));
  server_cmd->add_option("--kube-namespace-team", server.kube.namespace_teams,
                         "NAMESPACE=TEAM: the team of a namespace's pods (repeat; default: the namespace's name)");
  server_cmd->add_option("--kube-priority-class", server.kube.priority_classes,
                         "PRIORITYCLASS=CLASS: the Gantry priority class of pods of a PriorityClass (repeat)");
  server_cmd->add_option("--kube-service", server.kube.service,
                         "[NAMESPACE/]NAME of the selector-less Service whose Endpoints the leader points at itself");
  server_cmd->add_option("--kube-pod-ip", server.kube.pod_ip,
                         "This pod's IP for --kube-service (default: $POD_IP, else the --listen host)");
  server_cmd->add_option("--kube-pod-name", server.kube.pod_name,
                         "This pod's name, the leader's address's targetRef in --kube-service (default: $POD_NAME)");
  server_cmd->add_flag("--no-fsync", no_fsync,
                       "Commit without waiting for the disk (SQLite: no fsync; PostgreSQL: synchronous_commit off): "
                       "survives a crash of gantry, not of the machine");

  agent_cmd = app.add_subcommand("agent", "Run the node agent: register this node's GPUs, run its jobs");
  agent_cmd
      ->add_option("--server", agent.server,
                   "The server's address; several, comma-separated, for a leader and its standbys")
      ->default_str(agent.server);
  agent_cmd->add_option("--token", agent.token, "An agent token (gantry token --role agent)");
  agent_cmd->add_option("--token-file", agent.token_file, "File holding the token");
  agent_cmd->add_option("--node-id", agent.node_id, "Node name (default: the host name)");
  agent_cmd->add_option("--ca-cert", agent.ca_cert, "PEM CA certificate that signed the server's (https://)")
      ->check(CLI::ExistingFile);
  agent_cmd->add_option("--data-dir", agent.data_dir, "Job logs, checkpoints and run records")->required();
  AddJobRunnerFlags(agent_cmd, agent.runner);
  agent_cmd->add_option("--config", agent.config_dir, "Config directory (gpu_types.yaml, health.yaml)");
  agent_cmd->add_option("--fake-gpus", agent.fake_gpus, "This node's GPUs are fake: e.g. 4xT4");
  agent_cmd->add_option("--heartbeat", agent.heartbeat_s, "Seconds between reports at most")
      ->check(CLI::Range(0.1, 600.0));
  agent_cmd->add_option("--label", agent.labels,
                        "KEY=VALUE: a label of this node (repeat for more), e.g. pool=spot-a100");
  agent_cmd->add_option("--spot-notice-file", agent.spot_notice.file,
                        "Spot: the node is being reclaimed when this file exists (it may hold the seconds left or a "
                        "UTC time)");
  agent_cmd
      ->add_option("--spot-notice-command", agent.spot_notice.command,
                   "Spot: a command run every interval; exit 0 with output (seconds left or a UTC time) is a "
                   "reclaim notice (examples/autoscaler/aws-spot-notice.sh, gcp-preemption-notice.sh)")
      ->excludes("--spot-notice-file");
  agent_cmd
      ->add_option_function<double>(
          "--spot-notice-interval",
          [&agent](double s) { agent.spot_notice.interval_ms = static_cast<DurationMs>(s * 1000); },
          "Seconds between looks at the spot notice source (default 5)")
      ->check(CLI::Range(0.2, 300.0));

  gpus_cmd = app.add_subcommand("gpus", "What this machine's GPU provider (NVML, nvidia-smi) sees, as JSON");
  gpus_cmd->add_option("--provider", gpus.provider, "auto, nvml, nvidia-smi or fake (8 fake A100s)")
      ->check(CLI::IsMember({"auto", "nvml", "nvidia-smi", "fake"}));
  gpus_cmd->add_option("--measure", gpus.measure_s, "Poll for this many seconds and report the CPU it costs");
  gpus_cmd->add_option("--interval", gpus.interval_s, "Seconds between readings while measuring")
      ->check(CLI::Range(0.01, 60.0));

  TokenCommandOptions& token = c.token;
  c.token_cmd = app.add_subcommand("token", "Create a token for a user: prints it once, and the users.yaml entry");
  c.token_cmd->add_option("--user", token.user, "User name")->required();
  c.token_cmd->add_option("--team", token.team, "Team")->required();
  c.token_cmd->add_option("--role", token.role, "user, team-admin, admin, agent (a node agent) or login-node")
      ->check(CLI::IsMember({"user", "team-admin", "admin", "agent", "login-node"}));
  c.token_cmd->add_option("--expires", token.expires,
                          "UTC time after which the token is refused (2027-06-30T00:00:00Z)");
  c.token_cmd->add_option("--node", token.node, "The one node an agent token speaks for (--role agent)");
  c.token_cmd->add_option("--pool", token.pool, "Or: the node pool whose autoscaled nodes it speaks for (--role agent)")
      ->excludes("--node");
  c.token_cmd->callback([&token] {
    TimeMs expires = 0;
    if (!token.expires.empty() && !ParseUtc(token.expires, &expires)) {
      throw CLI::ValidationError("--expires", "a UTC time such as 2027-06-30T00:00:00Z, not '" + token.expires + "'");
    }
    bool bound = !token.node.empty() || !token.pool.empty();
    if ((token.role == "agent") != bound) {
      throw CLI::ValidationError("--node",
                                 "an agent token names its one node (--node ID) or its pool (--pool NAME); "
                                 "other roles have neither");
    }
  });
  DefineLoginNodeCommand(app, c);
}

CommandLine::CommandLine(const std::string& only) {
  app_.require_subcommand(1);
  app_.set_version_flag("--version", kVersionLine);
  if (only.empty()) DefineDaemonCommands(app_, daemon);
  // What the server sends is shown through TerminalSafe; a job's own output (logs, run)
  // goes past it as it is (WriteRaw). As std::cerr, the error stream flushes the output
  // before each write, so the two keep their order in one pipe.
  safe_err_.tie(&safe_out_);
  safe_err_.setf(std::ios::unitbuf);
  client_ = AddClientCommands(app_, safe_out_, safe_err_, only);
  docs_ = AddCliDocs(app_, std::cout, std::cerr);  // after every other command
}

std::unique_ptr<CommandLine> CommandLine::ForClient(int argc, char** argv) {
  std::string only = argc >= 2 ? argv[1] : "";
  if (only.empty() || only[0] == '-' || only == "help" || only == "completion" || only == "man" ||
      IsDaemonCommand(only)) {
    return std::make_unique<CommandLine>();
  }
  auto line = std::make_unique<CommandLine>(only);
  auto named = [&only](CLI::App* c) { return c->get_name() == only; };
  if (line->app_.get_subcommands(named).empty()) return std::make_unique<CommandLine>();  // not a command
  return line;
}

int CommandLine::Parse(int argc, char** argv) {
  if (argc >= 2 && argv[1][0] != '-') {
    std::string word = argv[1];
    if (app_.get_subcommands([&word](CLI::App* c) { return c->get_name() == word; }).empty()) {
      std::cerr << "gantry: no command '" << word << "' (gantry help lists them)\n";
      if (std::string hint = SlurmCommandHint(word); !hint.empty()) std::cerr << "hint: " << hint << "\n";
      return 2;
    }
  }
  std::vector<const char*> args = SplitAtDashes(argc, argv, client_->command.get());
  try {
    app_.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    int rc = app_.exit(e);
    if (rc != 0) {
      for (const std::string& hint : SlurmFlagHints(std::vector<std::string>(argv + 1, argv + argc))) {
        std::cerr << "hint: " << hint << "\n";
      }
      // `gantry exec 27 hostname -f`: the command's words were taken as gantry's.
      const std::string verb = argc >= 2 ? argv[1] : "";
      const bool dashes = std::any_of(argv + 1, argv + argc, [](const char* a) { return std::string(a) == "--"; });
      if ((verb == "exec" || verb == "shell" || verb == "run" || verb == "submit") && !dashes &&
          dynamic_cast<const CLI::ExtrasError*>(&e)) {
        std::cerr << "hint: the command goes after --: gantry " << verb << (verb == "exec" ? " ID" : "")
                  << " [options] -- CMD ARGS\n";
      }
    }
    // A usage error exits 2, as an unknown command does (CLI11's own codes, 105-114, tell
    // a script nothing it could act on).
    return rc == 0 ? 0 : 2;
  }
  return -1;
}

bool CommandLine::ClientWantsTls() const {
  if (!client_->chosen()) return false;
  ClientConfig config = *client_->config;
  return ResolveClientConfig(config).ok() && WantsTls(config);
}

int CommandLine::RunClientOrDocs() {
  try {
    if (int rc = client_->run(); rc >= 0) return rc;
  } catch (const nlohmann::json::exception& e) {
    // An answer of another shape than this client reads: another version's server, or
    // something that is not a Gantry server at all.
    safe_err_ << "gantry: the server's answer is not what this client reads (" << e.what()
              << "); is the server the same version as this client (gantry --version)?\n";
    return 1;
  }
  return docs_();
}

}  // namespace gantry
