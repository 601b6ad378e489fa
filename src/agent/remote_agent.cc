// The remote node agent.
#include "agent/remote_agent.h"

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

#include "agent/cgroups.h"
#include "agent/fake_provider.h"
#include "agent/gpu_monitor.h"
#include "agent/inventory.h"
#include "agent/local_agent.h"
#include "agent/log_shipper.h"
#include "agent/process.h"
#include "core/config_dir.h"
#include "server/agent_wire.h"
#include "server/fake_gpus.h"
#include "server/job_record.h"

namespace gantry {

namespace fs = std::filesystem;

namespace {

// What waits to be sent to the server: job events, readings, health changes.
class Outbox {
 public:
  void Event(nlohmann::json e) {
    Push([&] { events_.push_back(std::move(e)); });
  }
  void Telemetry(nlohmann::json t) {
    Push([&] { telemetry_.push_back(std::move(t)); });
  }
  void Health(nlohmann::json h) {
    Push([&] { health_.push_back(std::move(h)); });
  }
  // Waits up to `ms` for something to send; returns the report body and empties the box.
  nlohmann::json Take(const std::string& node_id, int ms) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return !events_.empty() || !health_.empty(); });
    nlohmann::json body = {{"node_id", node_id}, {"events", events_}, {"telemetry", telemetry_}, {"health", health_}};
    events_ = health_ = telemetry_ = nlohmann::json::array();
    return body;
  }
  // A report the server did not take goes back in front (at least once; the server
  // ignores repeats).
  void Return(const nlohmann::json& body) {
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::json events = body["events"];
    for (auto& e : events_) events.push_back(e);
    events_ = events;
    nlohmann::json health = body["health"];
    for (auto& h : health_) health.push_back(h);
    health_ = health;
  }

 private:
  template <typename F>
  void Push(F f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      f();
    }
    cv_.notify_one();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  nlohmann::json events_ = nlohmann::json::array();
  nlohmann::json telemetry_ = nlohmann::json::array();
  nlohmann::json health_ = nlohmann::json::array();
};

std::string Hostname() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
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

  Outbox outbox;
  std::string shim = o.shim.empty() ? fs::read_symlink("/proc/self/exe", ec).string() : o.shim;
  RunAs run_as = RunAs::kAuto;
  if (!ParseRunAs(o.run_jobs_as, &run_as)) {
    err << "gantry agent: --run-jobs-as: expected auto, user or agent\n";
    return 2;
  }
  std::string cgroups_note, cgroups_error;
  std::unique_ptr<JobCgroups> cgroups = JobCgroups::ForMode(o.job_cgroups, &cgroups_note, &cgroups_error);
  if (!cgroups_error.empty()) {
    err << "gantry agent: " << cgroups_error << "\n";
    return 2;
  }
  out << cgroups_note << "\n";
  LocalAgent* runner_ptr = nullptr;
  LogShipper logs([&](const std::string& id) { return runner_ptr->JobDir(id); });
  LocalAgent runner(
      LocalAgentOptions{data_dir, shim, 50, fake, run_as, "", provider.get(), cgroups.get(),
                        static_cast<int64_t>(o.max_log_mb * 1024 * 1024)},
      AgentReports{
          [&](const std::string& id, int run) {
            logs.Track(id);
            outbox.Event({{"type", "started"}, {"job_id", id}, {"run", run}});
          },
          [&](const std::string& id, int run, const std::string&, int code, const std::string& why, TimeMs ended_ms) {
            logs.Ended(id);
            outbox.Event({{"type", "exited"},
                          {"job_id", id},
                          {"run", run},
                          {"exit_code", code},
                          {"reason", why},
                          {"ended_ms", ended_ms}});
          },
          [&](const std::string&, int gpu, const std::vector<MigDeviceInfo>& devices, const std::string& id,
              const std::string& error) {
            nlohmann::json list = nlohmann::json::array();
            for (const MigDeviceInfo& m : devices) list.push_back(MigDeviceToJson(m));
            outbox.Event({{"type", "mig"}, {"gpu", gpu}, {"devices", list}, {"job_id", id}, {"error", error}});
          }});
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
    nlohmann::json body = {{"node_id", node_id}, {"inventory", InventoryToJson(inventory)}};
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
  runner.Start();

  std::map<std::string, GpuLocation> where;
  for (const GpuInfo& g : inventory.gpus) where[g.uuid] = {node_id, g.index};
  GpuMonitor monitor(*provider, *rules, where,
                     GpuReports{[&](const std::string&, std::vector<std::pair<int, GpuSample>> samples) {
                                  for (auto& [gpu, s] : samples) {
                                    outbox.Telemetry({{"gpu", gpu}, {"sample", SampleToWire(s)}});
                                  }
                                },
                                [&](const std::string&, int gpu, bool healthy, const std::string& why) {
                                  outbox.Health({{"gpu", gpu}, {"healthy", healthy}, {"reason", why}});
                                },
                                [&](int pid) { return runner.JobOfPid(pid); }});
  monitor.Start();

  std::thread sender([&] {
    while (!stop) {
      nlohmann::json body = outbox.Take(node_id, static_cast<int>(o.heartbeat_s * 1000));
      body["logs"] = logs.Collect(256 * 1024);
      auto r = reporter.Post("/v1/agent/report", body.dump(-1, ' ', false, kReplaceBadUtf8), "application/json");
      if (r && r->status == 200) logs.Acknowledge(body["logs"]);
      if (!r || r->status != 200) {
        outbox.Return(body);
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
            outbox.Event({{"type", "exited"},
                          {"job_id", order.value("job_id", "")},
                          {"run", order.value("run", 0)},
                          {"exit_code", 127},
                          {"reason", "bad order: " + start.status().ToString()}});
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
