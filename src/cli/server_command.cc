// The server process.
#include "cli/server_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <thread>

#include "agent/cgroups.h"
#include "agent/fake_gpus.h"
#include "agent/fake_provider.h"
#include "agent/gpu_monitor.h"
#include "agent/local_agent.h"
#include "agent/process.h"
#include "cli/job_runner_setup.h"
#include "core/host.h"
#include "protocol/inventory.h"
#include "server/agent_hub.h"
#include "server/http_api.h"

namespace gantry {

namespace fs = std::filesystem;

namespace {

bool SplitHostPort(const std::string& listen, std::string* host, int* port) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  std::string p = listen.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), *port);
  return ec == std::errc() && ptr == p.data() + p.size() && *port >= 0 && *port <= 65535 && !host->empty();
}

// The standalone admin token: created on first start, kept in DATA_DIR/admin.token (0600);
// the store keeps only its hash.
Expected<std::string> EnsureAdminToken(Controller& controller, const std::string& data_dir, std::ostream& out) {
  std::string path = data_dir + "/admin.token";
  std::string hash = controller.MetaValue("admin_token_sha256");
  std::ifstream in(path);
  std::string token;
  if (in >> token && Sha256Hex(token) == hash) {
    out << "admin token: " << path << "\n";
    return hash;
  }
  token = NewToken();
  std::string tmp = path + ".tmp";
  {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return Status::Internal("cannot write " + tmp);
    std::string line = token + "\n";
    bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) return Status::Internal("cannot write " + tmp);
  }
  fs::rename(tmp, path);
  hash = Sha256Hex(token);
  controller.SetMetaValue("admin_token_sha256", hash);
  out << "created an admin token in " << path << " (mode 0600)\n";
  return hash;
}

struct StandaloneGpus {
  std::vector<Node> nodes;
  std::unique_ptr<GpuProvider> provider;
  FakeGpuProvider* fake = nullptr;
};

// This machine's GPUs: fake ones when asked, else NVML, else nvidia-smi, else fake ones
// (a machine without GPUs still runs the whole system).
Expected<StandaloneGpus> StandaloneNodes(const std::string& fake_spec, const GpuCatalog& catalog, std::ostream& out) {
  StandaloneGpus found;
  std::string spec = fake_spec;
  if (spec.empty()) {
    std::string why;
    found.provider = DetectGpuProvider("auto", &why);
    if (found.provider) {
      auto inv = found.provider->Inventory();
      if (!inv) return inv.status();
      auto node = NodeFromInventory(Hostname(), *inv, catalog, {HostCpus(), HostMemoryMib()});
      if (!node) return node.status();
      out << fmt::format("GPUs from {}: {} GPU(s), driver {}\n", found.provider->name(), inv->gpus.size(),
                         inv->driver_version);
      found.nodes.push_back(std::move(*node));
      return found;
    }
    spec = "1x4xA100-80GB";
    out << "no GPU here (" << why << "); using fake GPUs " << spec << " (set --fake-gpus)\n";
  }
  auto nodes = ParseFakeGpus(spec, catalog);
  if (!nodes) return nodes.status();
  auto fake = std::make_unique<FakeGpuProvider>(FakeInventory(*nodes, catalog));
  found.fake = fake.get();
  found.provider = std::move(fake);
  found.nodes = std::move(*nodes);
  return found;
}

Status InjectFakeFault(FakeGpuProvider& fake, const std::vector<Node>& nodes, const std::string& node_id, int gpu,
                       const nlohmann::json& f) {
  std::string uuid;
  for (const Node& n : nodes) {
    if (n.id == node_id && gpu >= 0 && gpu < static_cast<int>(n.gpus.size())) uuid = n.gpus[gpu].uuid;
  }
  if (uuid.empty()) return Status::NotFound(fmt::format("no GPU {} on node {}", gpu, node_id));
  for (const auto& [key, value] : f.items()) {
    if (key == "xid" && value.is_number_integer()) {
      fake.InjectXid(uuid, value.get<int>());
    } else if (key == "temperature_c" && value.is_number()) {
      fake.SetTemperature(uuid, value.get<double>());
    } else if (key == "ecc_uncorrected" && value.is_number_integer()) {
      fake.AddUncorrectableEcc(uuid, value.get<int64_t>());
    } else if (key == "heal" && value.is_boolean()) {
      if (value.get<bool>()) fake.Heal(uuid);
    } else {
      return Status::Invalid(key, "unknown fault (xid, temperature_c, ecc_uncorrected, heal)");
    }
  }
  return Status::Ok();
}

}  // namespace

int RunServer(const ServerOptions& o, std::ostream& out, std::ostream& err) {
  // SIGTERM and SIGINT are taken by a waiting thread; block them before any thread starts.
  sigset_t stop_signals = BlockStopSignals();

  std::string host;
  int port = 0;
  if (!SplitHostPort(o.listen, &host, &port)) {
    err << "gantry server: --listen: expected HOST:PORT, got '" << o.listen << "'\n";
    return 2;
  }
  auto config = LoadConfigDir(o.config_dir);
  if (!config) {
    err << "gantry server: config: " << config.status().ToString() << "\n";
    return 2;
  }
  std::error_code ec;
  // Absolute: jobs run in their own working directories and the shim writes under it.
  std::string data_dir =
      fs::absolute(o.data_dir.empty() ? DefaultDataDir() : o.data_dir, ec).lexically_normal().string();
  fs::create_directories(data_dir, ec);
  if (ec) {
    err << "gantry server: cannot create " << data_dir << ": " << ec.message() << "\n";
    return 2;
  }
  // Others may pass through (jobs run as their users reach their checkpoint directories)
  // but not list; the database and the admin token are the server's alone.
  ::chmod(data_dir.c_str(), 0711);
  std::string db = o.db.empty() ? data_dir + "/gantry.db" : o.db;
  const auto max_log = static_cast<int64_t>(o.runner.max_log_mb * 1024 * 1024);
  auto store = OpenSqliteStore(db, {.synchronous_full = o.sync_full});
  if (!store) {
    err << "gantry server: " << store.status().ToString() << "\n";
    return 2;
  }
  for (const char* suffix : {"", "-wal", "-shm"}) ::chmod((db + suffix).c_str(), 0600);
  UserDirectory users;
  if (!o.config_dir.empty() && fs::exists(o.config_dir + "/users.yaml")) {
    auto loaded = UserDirectory::LoadFile(o.config_dir + "/users.yaml");
    if (!loaded) {
      err << "gantry server: " << loaded.status().ToString() << "\n";
      return 2;
    }
    users = std::move(*loaded);
  }

  auto pricing = PricingConfig::FromYaml(config->gpu_types_yaml, config->catalog);
  if (!pricing) {
    err << "gantry server: gpu_types.yaml: " << pricing.status().ToString() << "\n";
    return 2;
  }
  ControllerOptions copts;
  copts.pricing = std::move(*pricing);
  copts.config = std::move(*config);
  if (!o.config_dir.empty() && fs::exists(o.config_dir + "/team_quotas.yaml")) {
    copts.quotas_path = o.config_dir + "/team_quotas.yaml";
  }
  copts.node_timeout_ms = static_cast<DurationMs>(o.node_timeout_s * 1000);
  Controller controller(std::move(copts), std::move(*store));
  if (Status s = controller.Recover(); !s.ok()) {
    err << "gantry server: recovery from " << db << " failed: " << s.ToString() << "\n";
    return 1;
  }
  controller.Start();

  std::unique_ptr<JobCgroups> cgroups;  // outlives the agent that uses it
  std::unique_ptr<LocalAgent> agent;
  std::unique_ptr<GpuProvider> provider;
  FakeGpuProvider* fake = nullptr;
  std::unique_ptr<GpuMonitor> monitor;
  std::vector<Node> nodes;
  if (o.standalone) {
    auto rules = HealthRules::LoadDir(o.config_dir);
    if (!rules) {
      err << "gantry server: health.yaml: " << rules.status().ToString() << "\n";
      return 2;
    }
    auto found = StandaloneNodes(o.fake_gpus, controller.catalog(), out);
    if (!found) {
      err << "gantry server: " << found.status().ToString() << "\n";
      return 2;
    }
    nodes = std::move(found->nodes);
    provider = std::move(found->provider);
    fake = found->fake;
    auto setup = SetUpJobRunner(o.runner, data_dir + "/agent", provider.get(), fake);
    if (!setup) {
      err << "gantry server: " << setup.status().ToString() << "\n";
      return 2;
    }
    out << setup->note << "\n";
    cgroups = std::move(setup->cgroups);
    agent = std::make_unique<LocalAgent>(setup->options, controller);
    std::vector<RunReport> runs = agent->Recover();
    agent->Serve();
    if (Status s = controller.AttachNodes(nodes, agent.get(), runs); !s.ok()) {
      err << "gantry server: " << s.ToString() << "\n";
      return 2;
    }
    std::map<std::string, GpuLocation> where;
    for (const Node& n : nodes) {
      for (const Gpu& g : n.gpus) where[g.uuid] = {n.id, g.index};
    }
    LocalAgent* a = agent.get();
    monitor =
        std::make_unique<GpuMonitor>(*provider, *rules, where, controller, [a](int pid) { return a->JobOfPid(pid); });
    monitor->Start();
    auto hash = EnsureAdminToken(controller, data_dir, out);
    if (!hash) {
      err << "gantry server: " << hash.status().ToString() << "\n";
      return 1;
    }
    users.Add({{"admin", "admin", Role::kAdmin}, *hash});
    if (!users.HasTeamPolicy("admin")) {
      // The standalone admin's jobs run as the account that started the server: on a
      // server started as root, as root (its operator's own choice).
      struct passwd* self = getpwuid(geteuid());
      TeamPolicy own;
      own.unix_account = self ? self->pw_name : "";
      own.allow_root = geteuid() == 0;
      own.non_preemptible = true;
      users.SetTeam("admin", own);
      out << fmt::format("standalone: the admin's jobs run as {}\n", own.unix_account);
    }
    out << fmt::format("standalone: {} node(s), GPUs from {}, data in {}\n", nodes.size(), provider->name(), data_dir);
  }
  if (users.size() == 0) {
    err << "gantry server: no users: write " << (o.config_dir.empty() ? "CONFIG" : o.config_dir)
        << "/users.yaml (see docs/USER_GUIDE.md) or use --standalone\n";
    return 2;
  }

  controller.SetUsers(std::make_shared<const UserDirectory>(users));
  AgentHub hub(controller, data_dir + "/logs", max_log);
  HttpOptions hopts;
  hopts.agents = &hub;
  hopts.limits.workers = o.http_threads;
  hopts.limits.max_per_client = o.max_connections_per_client;
  hopts.limits.max_connections = o.max_connections;
  hopts.limits.request_timeout_s = o.request_timeout_s;
  hopts.limits.idle_timeout_s = o.idle_timeout_s;
  if (!o.tls_cert.empty() || !o.tls_key.empty()) {
    auto tls = TlsContext::Load(o.tls_cert, o.tls_key);
    if (!tls) {
      err << "gantry server: " << tls.status().ToString() << "\n";
      return 2;
    }
    hopts.tls = *tls;
  }
  hopts.open_metrics = o.open_metrics;
  if (fake) {
    hopts.inject_fault = [fake, &nodes](const std::string& node_id, int gpu, const nlohmann::json& f) -> Status {
      return InjectFakeFault(*fake, nodes, node_id, gpu, f);
    };
  }
  // A job's output: the in-process agent's files, else what remote agents shipped.
  LocalAgent* local = agent.get();
  hopts.log_path = [local, &hub](const std::string& id, const std::string& stream) {
    std::error_code ec;
    std::string here = local ? local->JobDir(id) + "/" + stream + ".log" : "";
    return local && fs::exists(here, ec) ? here : hub.LogPath(id, stream);
  };
  HttpApi api(controller, users, hopts);
  auto bound = api.Bind(host, port);
  if (!bound) {
    err << "gantry server: " << bound.status().ToString() << "\n";
    return 2;
  }
  std::string address = fmt::format("{}://{}:{}", hopts.tls ? "https" : "http", host, *bound);
  out << "gantry server listening on " << address << " (store " << db << ")" << std::endl;
  if (!o.ready_file.empty()) {
    std::ofstream(o.ready_file + ".tmp") << address << "\n";
    fs::rename(o.ready_file + ".tmp", o.ready_file, ec);
  }
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    hub.Close();
    api.Shutdown();
  });
  api.Serve();
  // Serve returned (a signal, or the listener failed): wake the waiter if it still waits.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  if (monitor) monitor->Stop();
  if (agent) agent->Shutdown();
  controller.Stop();
  out << "gantry server stopped" << std::endl;
  return 0;
}

}  // namespace gantry
