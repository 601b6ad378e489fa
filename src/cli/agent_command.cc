// `gantry agent`: the remote node agent's wiring (config, GPUs, runner, outbox) and its
// HTTP loops (register, long-poll orders, send reports).
#include "cli/agent_command.h"

#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <ostream>
#include <thread>

#include "agent/fake_gpus.h"
#include "agent/fake_provider.h"
#include "agent/gpu_monitor.h"
#include "agent/local_agent.h"
#include "agent/log_shipper.h"
#include "agent/process.h"
#include "agent/report_outbox.h"
#include "agent/server_connection.h"
#include "cli/job_runner_setup.h"
#include "core/config_dir.h"
#include "core/host.h"
#include "protocol/inventory.h"

namespace gantry {

namespace fs = std::filesystem;

namespace {

// This node's GPUs: fake ones when asked (`fake_spec`, e.g. 4xT4), else NVML, else nvidia-smi.
struct NodeGpus {
  std::unique_ptr<GpuProvider> provider;
  FakeGpuProvider* fake = nullptr;  // the provider, when the GPUs are fake
  GpuInventory inventory;
};

Expected<NodeGpus> OpenNodeGpus(const std::string& fake_spec, const std::string& node_id, const GpuCatalog& catalog) {
  NodeGpus gpus;
  if (!fake_spec.empty()) {
    std::string spec = fake_spec.find('x') == fake_spec.rfind('x') ? "1x" + fake_spec : fake_spec;
    auto nodes = ParseFakeGpus(spec, catalog);
    if (!nodes) return Status::Invalid("--fake-gpus", nodes.status().ToString());
    if (nodes->size() != 1) return Status::Invalid("--fake-gpus", "one node only (e.g. 4xT4)");
    for (Gpu& g : (*nodes)[0].gpus) g.uuid = fmt::format("GPU-fake-{}-{}", node_id, g.index);
    gpus.inventory = FakeInventory(*nodes, catalog);
    auto fake = std::make_unique<FakeGpuProvider>(gpus.inventory);
    gpus.fake = fake.get();
    gpus.provider = std::move(fake);
    return gpus;
  }
  std::string why;
  gpus.provider = DetectGpuProvider("auto", &why);
  if (!gpus.provider) {
    return Status::Precondition("gpus", "no GPU provider: " + why + " (use --fake-gpus on a machine without GPUs)");
  }
  auto inventory = gpus.provider->Inventory();
  if (!inventory) return inventory.status();
  gpus.inventory = *inventory;
  gpus.inventory.mps = MpsDaemons::Runnable(kMpsControl);
  return gpus;
}

}  // namespace

int RunAgent(const AgentOptions& o, std::ostream& out, std::ostream& err) {
  sigset_t stop_signals = BlockStopSignals();

  std::string token = o.token;
  if (token.empty() && !o.token_file.empty()) std::ifstream(o.token_file) >> token;
  if (token.empty()) {
    err << "gantry agent: a token is required (--token or --token-file; `gantry token --role agent` makes one)\n";
    return 2;
  }
  auto servers = ParseServerList(o.server, "--server");
  if (!servers) {
    err << "gantry agent: " << servers.status().ToString() << "\n";
    return 2;
  }
  auto config = LoadConfigDir(o.config_dir);
  if (!config) {
    err << "gantry agent: config: " << config.status().ToString() << "\n";
    return 2;
  }
  auto rules = HealthRules::LoadDir(o.config_dir);
  if (!rules) {
    err << "gantry agent: health.yaml: " << rules.status().ToString() << "\n";
    return 2;
  }
  std::map<std::string, std::string> labels;
  for (const std::string& kv : o.labels) {
    size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos || kv.size() > 253 ||
        kv.find_first_of(" \t\n\r\"'$`;|&<>") != std::string::npos) {
      err << "gantry agent: --label: '" << kv << "' must be KEY=VALUE (no spaces or shell characters)\n";
      return 2;
    }
    labels[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::string node_id = o.node_id.empty() ? Hostname() : o.node_id;
  std::error_code ec;
  std::string data_dir = fs::absolute(o.data_dir.empty() ? "gantry-agent" : o.data_dir, ec).string();
  fs::create_directories(data_dir, ec);
  auto gpus = OpenNodeGpus(o.fake_gpus, node_id, config->catalog);
  if (!gpus) {
    err << "gantry agent: " << gpus.status().ToString() << "\n";
    return 2;
  }
  auto setup = SetUpJobRunner(o.runner, data_dir, gpus->provider.get(), gpus->fake);
  if (!setup) {
    err << "gantry agent: " << setup.status().ToString() << "\n";
    return 2;
  }
  out << setup->note << "\n";
  NoteContainers(setup->containers, gpus->inventory);
  auto network = NodeNetworkFrom(o.runner);
  if (!network) {
    err << "gantry agent: " << network.status().ToString() << "\n";
    return 2;
  }

  LocalAgent* runner_ptr = nullptr;
  LogShipper logs([&](const std::string& id) { return runner_ptr->JobDir(id); });
  ReportOutbox outbox(node_id, &logs);
  LocalAgent runner(setup->options, outbox);
  runner_ptr = &runner;
  std::vector<RunReport> recovered = runner.Recover();
  for (const RunReport& r : recovered) {
    logs.Track(r.job_id, r.run);  // the server skips what it has already
    if (r.exited) logs.Ended(r.job_id, r.run);
  }
  auto registration = [&](std::vector<RunReport> runs) {
    if (auto now = gpus->provider->Inventory()) {  // MIG instances may have changed
      now->mps = gpus->inventory.mps;
      now->containers = gpus->inventory.containers;
      now->containers_problem = gpus->inventory.containers_problem;
      gpus->inventory = *now;
    }
    Registration reg{node_id, gpus->inventory, std::move(runs), HostCpus(), HostMemoryMib(), {}, *network};
    reg.labels = labels;
    if (gpus->fake) reg.labels["gantry.io/fake"] = "true";
    return reg;
  };
  // A token file is read again when it changes (a Kubernetes projected token rotates).
  ServerConnection server(
      {*servers, token, o.token.empty() ? o.token_file : "", o.ca_cert, node_id, o.poll_wait_s, o.heartbeat_s}, err);
  // SIGTERM and SIGINT are taken in every state, the first registration's retries (no
  // server reachable yet) included: systemd's stop does not wait out its timeout.
  std::promise<void> stop_asked;
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.Stop();
    stop_asked.set_value();
  });
  signals.detach();  // it outlives this function only until the _Exit below
  if (!server.Register(registration(recovered))) {
    if (server.stopping()) {
      out << "gantry agent stopped before it registered" << std::endl;
      std::_Exit(0);
    }
    return 1;
  }
  out << fmt::format("gantry agent: node {} registered with {} ({} GPU(s) from {})", node_id, server.server(),
                     gpus->inventory.gpus.size(), gpus->provider->name())
      << std::endl;
  runner.Serve();
  SpotNoticeWatcher spot(o.spot_notice, node_id, outbox, out);
  spot.Start();

  std::map<std::string, GpuLocation> where;
  for (const GpuInfo& g : gpus->inventory.gpus) where[g.uuid] = {node_id, g.index};
  GpuMonitor monitor(*gpus->provider, *rules, where, outbox, [&](int pid) { return runner.JobOfPid(pid); });
  monitor.Start();
  std::thread sender([&] { server.SendReports(outbox, logs); });
  // A registration after the first may be with another server (a take-over): it gets the
  // running jobs' output again from the start, and skips what it has.
  std::thread poller([&] {
    server.PollOrders(runner, outbox, [&] {
      logs.Rewind();
      return registration(runner.ActiveRuns());
    });
  });
  stop_asked.get_future().wait();
  // The jobs keep running: a restarted agent adopts them.
  spot.Stop();
  monitor.Stop();
  runner.Shutdown();
  out << "gantry agent stopped (its jobs keep running)" << std::endl;
  std::_Exit(0);  // the poller may sit in a long poll; nothing else needs unwinding
}

}  // namespace gantry
