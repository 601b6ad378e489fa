// `gantry agent`: the remote node agent's wiring (config, GPUs, runner, outbox) and its
// HTTP loops (register, long-poll orders, send reports).
#include "cli/agent_command.h"

#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <ostream>
#include <thread>

#include "agent/fake_gpus.h"
#include "agent/fake_provider.h"
#include "agent/gpu_monitor.h"
#include "agent/local_agent.h"
#include "agent/log_shipper.h"
#include "agent/process.h"
#include "agent/report_outbox.h"
#include "cli/job_runner_setup.h"
#include "core/config_dir.h"
#include "core/host.h"
#include "protocol/inventory.h"
#include "protocol/order_wire.h"
#include "protocol/spec_json.h"

namespace gantry {

namespace fs = std::filesystem;

int RunAgent(const AgentOptions& o, std::ostream& out, std::ostream& err) {
  sigset_t stop_signals = BlockStopSignals();

  std::string token = o.token;
  if (token.empty() && !o.token_file.empty()) std::ifstream(o.token_file) >> token;
  if (token.empty()) {
    err << "gantry agent: a token is required (--token or --token-file; `gantry token --role agent` makes one)\n";
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
  std::string node_id = o.node_id.empty() ? Hostname() : o.node_id;
  std::error_code ec;
  std::string data_dir = fs::absolute(o.data_dir.empty() ? "gantry-agent" : o.data_dir, ec).string();
  fs::create_directories(data_dir, ec);

  // GPUs: fake ones when asked, else NVML, else nvidia-smi.
  std::unique_ptr<GpuProvider> provider;
  FakeGpuProvider* fake = nullptr;
  GpuInventory inventory;
  if (!o.fake_gpus.empty()) {
    std::string spec = o.fake_gpus.find('x') == o.fake_gpus.rfind('x') ? "1x" + o.fake_gpus : o.fake_gpus;
    auto nodes = ParseFakeGpus(spec, config->catalog);
    if (!nodes || nodes->size() != 1) {
      err << "gantry agent: --fake-gpus: " << (nodes ? "one node only (e.g. 4xT4)" : nodes.status().ToString()) << "\n";
      return 2;
    }
    for (Gpu& g : (*nodes)[0].gpus) g.uuid = fmt::format("GPU-fake-{}-{}", node_id, g.index);
    inventory = FakeInventory(*nodes, config->catalog);
    auto f = std::make_unique<FakeGpuProvider>(inventory);
    fake = f.get();
    provider = std::move(f);
  } else {
    std::string why;
    provider = DetectGpuProvider("auto", &why);
    if (!provider) {
      err << "gantry agent: no GPU provider: " << why << " (use --fake-gpus on a machine without GPUs)\n";
      return 2;
    }
    auto inv = provider->Inventory();
    if (!inv) {
      err << "gantry agent: " << inv.status().ToString() << "\n";
      return 2;
    }
    inventory = *inv;
  }

  auto setup = SetUpJobRunner(o.runner, data_dir, provider.get(), fake);
  if (!setup) {
    err << "gantry agent: " << setup.status().ToString() << "\n";
    return 2;
  }
  out << setup->note << "\n";
  LocalAgent* runner_ptr = nullptr;
  LogShipper logs([&](const std::string& id) { return runner_ptr->JobDir(id); });
  ReportOutbox outbox(node_id, &logs);
  LocalAgent runner(setup->options, outbox);
  runner_ptr = &runner;
  std::vector<RunReport> recovered = runner.Recover();
  for (const RunReport& r : recovered) {
    logs.Track(r.job_id);  // the server skips what it has already
    if (r.exited) logs.Ended(r.job_id);
  }

  httplib::Client http(o.server);
  http.set_bearer_token_auth(token);
  http.set_tcp_nodelay(true);
  http.set_keep_alive(true);
  http.set_read_timeout(o.poll_wait_s + 10);
  httplib::Client reporter(o.server);
  reporter.set_bearer_token_auth(token);
  reporter.set_tcp_nodelay(true);
  reporter.set_keep_alive(true);
  if (!o.ca_cert.empty()) {
    http.set_ca_cert_path(o.ca_cert.c_str());
    reporter.set_ca_cert_path(o.ca_cert.c_str());
  }

  std::atomic<bool> stop{false};
  std::string session;  // the poller's
  uint64_t acked = 0;
  auto register_node = [&](const std::vector<RunReport>& runs) {
    if (auto now = provider->Inventory()) inventory = *now;  // MIG instances may have changed
    nlohmann::json body = {{"node_id", node_id},
                           {"inventory", InventoryToJson(inventory)},
                           {"cpus", HostCpus()},
                           {"memory_mib", HostMemoryMib()}};
    if (fake) body["labels"] = {{"gantry.io/fake", "true"}};
    nlohmann::json list = nlohmann::json::array();
    for (const RunReport& r : runs) list.push_back(RunReportToJson(r));
    body["runs"] = list;
    for (int attempt = 0; !stop; ++attempt) {
      auto r = http.Post("/v1/agent/register", body.dump(-1, ' ', false, kReplaceBadUtf8), "application/json");
      if (r && r->status == 200) {
        nlohmann::json answer = nlohmann::json::parse(r->body, nullptr, false);
        session = answer.value("session", "");
        acked = answer.value("ack", uint64_t{0});
        return true;
      }
      if (r && r->status < 500 && r->status != 404) {
        err << "gantry agent: registration refused: " << r->status << " " << r->body << "\n";
        return false;
      }
      if (attempt % 10 == 0) err << "gantry agent: server " << o.server << " not reachable yet; retrying\n";
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return false;
  };
  if (!register_node(recovered)) return 1;
  out << fmt::format("gantry agent: node {} registered with {} ({} GPU(s) from {})", node_id, o.server,
                     inventory.gpus.size(), provider->name())
      << std::endl;
  runner.Serve();

  std::map<std::string, GpuLocation> where;
  for (const GpuInfo& g : inventory.gpus) where[g.uuid] = {node_id, g.index};
  GpuMonitor monitor(*provider, *rules, where, outbox, [&](int pid) { return runner.JobOfPid(pid); });
  monitor.Start();

  std::thread sender([&] {
    while (!stop) {
      AgentReport report = outbox.Take(static_cast<int>(o.heartbeat_s * 1000));
      nlohmann::json body = AgentReportToJson(report);
      body["logs"] = logs.Collect(256 * 1024);
      auto r = reporter.Post("/v1/agent/report", body.dump(-1, ' ', false, kReplaceBadUtf8), "application/json");
      if (r && r->status == 200) {
        logs.Acknowledge(body["logs"]);
      } else {
        outbox.Return(std::move(report));
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    }
  });
  std::thread poller([&] {
    while (!stop) {
      auto r = http.Get(
          fmt::format("/v1/agent/orders?node={}&session={}&ack={}&wait={}", node_id, session, acked, o.poll_wait_s));
      if (!r) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        continue;
      }
      if (r->status == 404 || r->status == 409) {  // the server restarted (or forgot us): register again
        register_node(runner.ActiveRuns());
        continue;
      }
      nlohmann::json body = nlohmann::json::parse(r->body, nullptr, false);
      for (const auto& order : FieldOr(body, "orders", EmptyList())) {
        uint64_t seq = order.value("seq", uint64_t{0});
        if (seq <= acked) continue;  // applied already; its acknowledgement was lost
        acked = seq;
        if (order.value("type", "") == "start") {
          auto start = StartOrderFromJson(order);
          if (start) {
            runner.Start(*start);
          } else {
            outbox.RunExited({order.value("job_id", ""), order.value("run", 0), node_id, true, 127,
                              "bad order: " + start.status().ToString(), -1});
          }
        } else if (order.value("type", "") == "stop") {
          runner.Stop(StopOrderFromJson(order));
        }
      }
    }
  });
  int sig = 0;
  sigwait(&stop_signals, &sig);
  // The jobs keep running: a restarted agent adopts them.
  stop = true;
  monitor.Stop();
  runner.Shutdown();
  out << "gantry agent stopped (its jobs keep running)" << std::endl;
  std::_Exit(0);  // the poller may sit in a long poll; nothing else needs unwinding
}

}  // namespace gantry
