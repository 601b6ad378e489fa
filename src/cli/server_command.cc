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
#include <optional>
#include <ostream>
#include <random>
#include <thread>

#include "agent/cgroups.h"
#include "agent/fake_gpus.h"
#include "agent/fake_provider.h"
#include "agent/gpu_monitor.h"
#include "agent/local_agent.h"
#include "agent/process.h"
#include "cli/job_runner_setup.h"
#include "cli/server_kube.h"
#include "cli/server_leadership.h"
#include "core/host.h"
#include "core/node_pools.h"
#include "core/read_file.h"
#include "core/yaml_util.h"
#include "net/http_exchange.h"
#include "protocol/inventory.h"
#include "server/agent_hub.h"
#include "server/http_api.h"
#include "server/identity_service.h"
#include "server/port_proxy.h"
#include "server/stream_hub.h"

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

// The in-process agent of a standalone server and what it runs on.
struct Standalone {
  std::unique_ptr<GpuProvider> provider;
  FakeGpuProvider* fake = nullptr;
  std::vector<Node> nodes;
  std::unique_ptr<JobCgroups> cgroups;  // outlives the agent that uses it
  std::unique_ptr<LocalAgent> agent;
  std::unique_ptr<GpuMonitor> monitor;
};

// This machine's GPUs into `found`: fake ones when asked, else NVML, else nvidia-smi, else
// fake ones (a machine without GPUs still runs the whole system).
Status FindStandaloneGpus(const std::string& fake_spec, const GpuCatalog& catalog, Standalone& found,
                          std::ostream& out) {
  std::string spec = fake_spec;
  if (spec.empty()) {
    std::string why;
    found.provider = DetectGpuProvider("auto", &why);
    if (found.provider) {
      auto inv = found.provider->Inventory();
      if (!inv) return inv.status();
      inv->mps = MpsDaemons::Runnable(kMpsControl);
      auto node = NodeFromInventory(Hostname(), *inv, catalog, {HostCpus(), HostMemoryMib()});
      if (!node) return node.status();
      out << fmt::format("GPUs from {}: {} GPU(s), driver {}\n", found.provider->name(), inv->gpus.size(),
                         inv->driver_version);
      found.nodes.push_back(std::move(*node));
      return Status::Ok();
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
  return Status::Ok();
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

// This server's name in the leader row: the host and a random id kept in the data
// directory, so a restart after a crash takes its own row back at once.
std::string LeaderName(const std::string& data_dir) {
  const std::string path = data_dir + "/leader-id";
  std::string id;
  if (auto text = ReadTextFile(path)) id = text->substr(0, text->find('\n'));
  if (id.empty()) {
    std::random_device rd;
    id = fmt::format("{:08x}{:08x}", rd(), rd());
    std::ofstream(path) << id << "\n";
  }
  return Hostname() + ":" + id;
}

// The server's address for links in notifications: --public-url, else --listen (this
// host's name for a wildcard address); empty for port 0 (not known yet).
std::string PublicUrl(const ServerOptions& o, const std::string& host, int port) {
  std::string url = o.public_url;
  if (url.empty() && port != 0) {
    bool any = host == "0.0.0.0" || host == "::" || host == "[::]";
    url = fmt::format("{}://{}:{}", o.tls_cert.empty() ? "http" : "https", any ? Hostname() : host, port);
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// Where browsers reach the port listener and the dashboard: --ports-url, else the listener's
// port on --public-url's host (else the listener's host); the dashboard at --public-url,
// else the API's address. The two must be different origins: a job's pages must not read
// the dashboard's tokens.
Expected<std::pair<std::string, std::string>> PortsUrls(const ServerOptions& o, const std::string& api_address,
                                                        const std::string& ports_host, int ports_port) {
  std::string dashboard = o.public_url.empty() ? api_address : o.public_url;
  while (!dashboard.empty() && dashboard.back() == '/') dashboard.pop_back();
  std::string ports = o.ports_url;
  if (ports.empty()) {
    std::string host = ports_host == "0.0.0.0" || ports_host == "::" || ports_host == "[::]" ? Hostname() : ports_host;
    if (auto pub = SplitServerAddress(dashboard); pub && !o.public_url.empty()) host = pub->host;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    ports = fmt::format("{}://{}:{}", o.tls_cert.empty() ? "http" : "https", host, ports_port);
  }
  while (!ports.empty() && ports.back() == '/') ports.pop_back();
  auto theirs = SplitServerAddress(ports);
  auto ours = SplitServerAddress(dashboard);
  if (!theirs) return Status::Invalid("--ports-url", "not a URL: " + ports);
  // Hosts as a browser compares them: case and a trailing dot aside.
  auto host = [](std::string h) {
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!h.empty() && h.back() == '.') h.pop_back();
    return h;
  };
  if (ours && theirs->scheme == ours->scheme && host(theirs->host) == host(ours->host) && theirs->port == ours->port) {
    return Status::Invalid("--ports-url", "is the dashboard's own origin (" + dashboard +
                                              "): jobs' pages would read its tokens; give the ports another host "
                                              "or port");
  }
  return std::make_pair(ports, dashboard);
}

// DIR/pools.yaml, when there is one: the node pools the autoscaler grows and shrinks. A
// pool's nodes bill at its capacity's price list (spot or on-demand) and at its own price
// when it has one, unless gpu_types.yaml's pricing names the pool itself.
Status LoadPools(const std::string& config_dir, ControllerOptions& copts) {
  if (config_dir.empty() || !fs::exists(config_dir + "/pools.yaml")) return Status::Ok();
  auto text = ReadFileNoThrow(config_dir + "/pools.yaml", 1 << 20);
  if (!text) return Status::Invalid("pools.yaml", "cannot be read (or is over 1 MiB)");
  auto pools = ParseAutoscalerYaml(*text, copts.config.catalog);
  if (!pools) return Status::Invalid("pools.yaml", pools.status().ToString());
  for (const NodePool& p : pools->pools) {
    PoolPricing& billed = copts.pricing.pools[p.name];
    if (!billed.rate) billed.rate = p.capacity == Capacity::kSpot ? PriceRate::kSpot : PriceRate::kOnDemand;
    const std::string& type = copts.config.catalog.Get(p.type).name;
    if (p.price_per_gpu_hour >= 0 && !billed.prices.count(type)) billed.prices[type] = p.price_per_gpu_hour;
  }
  copts.autoscaler = std::move(*pools);
  return Status::Ok();
}

// The controller's options from the config directory: catalog, scheduler, quotas (re-read
// when team_quotas.yaml changes), pricing, node timeout.
Expected<ControllerOptions> ControllerOptionsFrom(const ServerOptions& o) {
  auto config = LoadConfigDir(o.config_dir);
  if (!config) return Status::Invalid("config", config.status().ToString());
  auto pricing = PricingConfig::FromYaml(config->gpu_types_yaml, config->catalog);
  if (!pricing) return Status::Invalid("gpu_types.yaml", pricing.status().ToString());
  ControllerOptions copts;
  copts.pricing = std::move(*pricing);
  copts.config = std::move(*config);
  // Watched even before it exists: a team_quotas.yaml written later applies at once.
  if (!o.config_dir.empty()) copts.quotas_path = o.config_dir + "/team_quotas.yaml";
  copts.node_timeout_ms = static_cast<DurationMs>(o.node_timeout_s * 1000);
  if (Status s = LoadPools(o.config_dir, copts); !s.ok()) return s;
  copts.history_interval_ms = static_cast<DurationMs>(o.history_interval_s * 1000);
  return copts;
}

// Finds this machine's GPUs, starts the job runner (adopting the runs an earlier server
// left), attaches its node to the controller and starts watching the GPUs.
Status StartStandalone(const ServerOptions& o, const std::string& data_dir, Controller& controller, Standalone& s,
                       std::ostream& out) {
  auto rules = HealthRules::LoadDir(o.config_dir);
  if (!rules) return Status::Invalid("health.yaml", rules.status().ToString());
  if (Status found = FindStandaloneGpus(o.fake_gpus, controller.catalog(), s, out); !found.ok()) return found;
  auto network = NodeNetworkFrom(o.runner);
  if (!network) return network.status();
  for (Node& n : s.nodes) n.network = *network;
  auto setup = SetUpJobRunner(o.runner, data_dir + "/agent", s.provider.get(), s.fake);
  if (!setup) return setup.status();
  out << setup->note << "\n";
  for (Node& n : s.nodes) {
    n.containers = setup->containers.works;
    n.containers_problem = setup->containers.problem;
  }
  s.cgroups = std::move(setup->cgroups);
  s.agent = std::make_unique<LocalAgent>(setup->options, controller);
  std::vector<RunReport> runs = s.agent->Recover();
  s.agent->Serve();
  if (Status attached = controller.AttachNodes(s.nodes, s.agent.get(), runs); !attached.ok()) return attached;
  std::map<std::string, GpuLocation> where;
  for (const Node& n : s.nodes) {
    for (const Gpu& g : n.gpus) where[g.uuid] = {n.id, g.index};
  }
  LocalAgent* agent = s.agent.get();
  s.monitor = std::make_unique<GpuMonitor>(*s.provider, *rules, where, controller,
                                           [agent](int pid) { return agent->JobOfPid(pid); });
  s.monitor->Start();
  out << fmt::format("standalone: {} node(s), GPUs from {}, data in {}\n", s.nodes.size(), s.provider->name(),
                     data_dir);
  return Status::Ok();
}

// The standalone admin: its token (made on first start) and, unless users.yaml says
// otherwise, a team policy that runs its jobs as the account that started the server (on a
// server started as root, as root: its operator's own choice).
Status AddStandaloneAdmin(Controller& controller, const std::string& data_dir, UserDirectory& users,
                          std::ostream& out) {
  auto hash = EnsureAdminToken(controller, data_dir, out);
  if (!hash) return hash.status();
  users.Add({{"admin", "admin", Role::kAdmin}, *hash});
  if (users.HasTeamPolicy("admin")) return Status::Ok();
  struct passwd* self = getpwuid(geteuid());
  TeamPolicy own;
  own.unix_account = self ? self->pw_name : "";
  own.allow_root = geteuid() == 0;
  own.non_preemptible = true;
  users.SetTeam("admin", own);
  out << fmt::format("standalone: the admin's jobs run as {}\n", own.unix_account);
  return Status::Ok();
}

// The HTTP API's options: the front end's limits and TLS from the flags, the agent hub, the
// job logs (the in-process agent's files, else what remote agents shipped) and, with fake
// GPUs, fault injection.
Expected<HttpOptions> HttpOptionsFrom(const ServerOptions& o, AgentHub& hub, Standalone& local) {
  HttpOptions hopts;
  hopts.agents = &hub;
  if (FakeGpuProvider* fake = local.fake) {
    hopts.inject_fault = [fake, &local](const std::string& node_id, int gpu, const nlohmann::json& f) -> Status {
      return InjectFakeFault(*fake, local.nodes, node_id, gpu, f);
    };
  }
  LocalAgent* agent = local.agent.get();
  hopts.job_log_dirs = [agent, &hub](const std::string& id) {
    std::vector<std::string> dirs;
    if (agent) dirs.push_back(agent->JobDir(id));
    dirs.push_back(hub.JobLogDir(id));
    return dirs;
  };
  hopts.limits.workers = o.http_threads;
  hopts.limits.max_per_client = o.max_connections_per_client;
  hopts.limits.max_connections = o.max_connections;
  hopts.limits.request_timeout_s = o.request_timeout_s;
  hopts.limits.idle_timeout_s = o.idle_timeout_s;
  if (!o.tls_cert.empty() || !o.tls_key.empty()) {
    auto tls = TlsContext::Load(o.tls_cert, o.tls_key, o.tls_ciphers);
    if (!tls) return tls.status();
    hopts.tls = *tls;
    hopts.tls_served = true;
  }
  hopts.open_metrics = o.open_metrics;
  hopts.public_url = o.public_url;
  return hopts;
}

}  // namespace

int RunServer(const ServerOptions& o, std::ostream& out, std::ostream& err) {
  // SIGTERM and SIGINT are taken by a waiting thread; block them before any thread starts.
  sigset_t stop_signals = BlockStopSignals();
  auto fail = [&err](const Status& s, int code) {
    err << "gantry server: " << s.ToString() << "\n";
    return code;
  };
  std::string host;
  int port = 0;
  if (!SplitHostPort(o.listen, &host, &port)) {
    return fail(Status::Invalid("--listen", "expected HOST:PORT, got '" + o.listen + "'"), 2);
  }
  auto copts = ControllerOptionsFrom(o);
  if (!copts) return fail(copts.status(), 2);
  copts->sendmail = o.sendmail;
  copts->public_url = PublicUrl(o, host, port);
  std::error_code ec;
  // Absolute: jobs run in their own working directories and the shim writes under it.
  std::string data_dir =
      fs::absolute(o.data_dir.empty() ? DefaultDataDir() : o.data_dir, ec).lexically_normal().string();
  fs::create_directories(data_dir, ec);
  if (ec) return fail(Status::Internal("cannot create " + data_dir + ": " + ec.message()), 2);
  // Others may pass through (jobs run as their users reach their checkpoint directories)
  // but not list; the database and the admin token are the server's alone.
  ::chmod(data_dir.c_str(), 0711);
  std::string db = o.db.empty() ? data_dir + "/gantry.db" : o.db;
  const bool postgres = IsPostgresUrl(db);
  auto store = postgres ? OpenPostgresStore(db, {.synchronous_commit = o.sync_full})
                        : OpenSqliteStore(db, {.synchronous_full = o.sync_full});
  if (!store) return fail(store.status(), 2);
  if (!postgres) {
    for (const char* suffix : {"", "-wal", "-shm"}) ::chmod((db + suffix).c_str(), 0600);
  }
  // On a shared PostgreSQL store, one server leads and the others stand by until it stops.
  std::unique_ptr<LeaderLease> lease;
  std::optional<LeaseKeeper> keeper;
  if (postgres) {
    StandbyOptions so{.db = db,
                      .host = host,
                      .port = port,
                      .my_url = PublicUrl(o, host, port),
                      .me = LeaderName(data_dir),
                      .lease_ms = static_cast<DurationMs>(o.leader_lease_s * 1000),
                      .tls_cert = o.tls_cert,
                      .tls_key = o.tls_key,
                      .tls_ciphers = o.tls_ciphers};
    bool stopped = false;
    auto led = AwaitLeadership(so, stop_signals, &port, &stopped, out);
    if (!led) return fail(led.status(), 2);
    if (stopped) {
      out << "gantry server stopped (standby)" << std::endl;
      return 0;
    }
    lease = std::move(*led);
    keeper.emplace(*lease, err);
    (*store)->SetFencingTerm(lease->term());
    copts->public_url = PublicUrl(o, host, port);  // the standby may have picked the port
    copts->leader_term = lease->term();
    copts->leader_takeovers = lease->takeovers();
    out << "leader: term " << lease->term() << std::endl;
  }
  UserDirectory users;
  if (!o.config_dir.empty() && fs::exists(o.config_dir + "/users.yaml")) {
    auto loaded = UserDirectory::LoadFile(o.config_dir + "/users.yaml");
    if (!loaded) return fail(loaded.status(), 2);
    users = std::move(*loaded);
  }
  std::optional<IdentityConfig> identity_config;
  if (!o.config_dir.empty() && fs::exists(o.config_dir + "/identity.yaml")) {
    auto loaded = IdentityConfig::LoadFile(o.config_dir + "/identity.yaml");
    if (!loaded) return fail(loaded.status(), 2);
    identity_config = std::move(*loaded);
  }
  Controller controller(std::move(*copts), std::move(*store));
  if (Status s = controller.Recover(); !s.ok()) {
    return fail(Status::Internal("recovery from " + RedactDbUrl(db) + " failed: " + s.ToString()), 1);
  }
  controller.Start();

  Standalone local;
  if (o.standalone) {
    if (Status s = StartStandalone(o, data_dir, controller, local, out); !s.ok()) return fail(s, 2);
    if (Status s = AddStandaloneAdmin(controller, data_dir, users, out); !s.ok()) return fail(s, 1);
  }
  if (users.size() == 0 && !identity_config) {
    err << "gantry server: no users: write " << (o.config_dir.empty() ? "CONFIG" : o.config_dir)
        << "/users.yaml (see docs/USER_GUIDE.md) or use --standalone\n";
    return 2;
  }
  controller.SetUsers(std::make_shared<const UserDirectory>(users));
  AgentHub hub(controller, data_dir + "/logs", static_cast<int64_t>(o.runner.max_log_mb * 1024 * 1024));
  auto hopts = HttpOptionsFrom(o, hub, local);
  if (!hopts) return fail(hopts.status(), 2);
  StreamHub streams(controller);
  hopts->streams = &streams;
  std::unique_ptr<IdentityService> identity;
  if (identity_config) {
    identity = std::make_unique<IdentityService>(std::move(*identity_config), controller);
    hopts->identity = identity.get();
    out << "sign-in: " << (identity->has_oidc() ? "OpenID Connect (" + identity->config().oidc->issuer + ")" : "")
        << (identity->has_oidc() ? ", " : "") << "login nodes, static tokens" << std::endl;
  }
  // Jobs' named ports, on a listener (and so an origin) of their own.
  std::unique_ptr<PortProxy> ports;
  std::string ports_host = host;
  int ports_port = 0;
  if (o.ports_listen != "off") {
    if (!o.ports_listen.empty() && !SplitHostPort(o.ports_listen, &ports_host, &ports_port)) {
      return fail(Status::Invalid("--ports-listen", "expected HOST:PORT or off, got '" + o.ports_listen + "'"), 2);
    }
    PortProxyOptions popts{.limits = hopts->limits, .tls = hopts->tls};
    // A notebook's uploads come in chunks of 1 MiB (as JSON); bodies are read before a
    // request is checked (cookies reach no body gate), so no larger.
    popts.limits.max_body_bytes = 2 << 20;
    IdentityService* signed_in = identity.get();
    ports = std::make_unique<PortProxy>(
        controller, streams,
        [&users, signed_in](const std::string& token, const std::string& team, const std::string& addr) {
          return PersonByToken(users, signed_in, token, team, addr);
        },
        popts);
    auto bound = ports->Bind(ports_host, ports_port);
    if (!bound) return fail(bound.status(), 2);
    ports_port = *bound;
    hopts->ports = ports.get();
  }
  std::unique_ptr<KubeServerSide> kube;
  if (o.kube.enabled()) {
    auto started = KubeServerSide::Start(o.kube, controller, *hopts);
    if (!started) return fail(started.status(), 2);
    kube = std::move(*started);
    out << kube->Describe() << std::endl;
  }
  HttpApi api(controller, users, *hopts);
  auto bound = api.Bind(host, port);
  if (!bound) return fail(bound.status(), 2);
  std::string address = fmt::format("{}://{}:{}", hopts->tls ? "https" : "http", host, *bound);
  if (kube) {
    if (Status s = kube->PublishLeader(o.kube, host, *bound, err); !s.ok()) return fail(s, 2);
  }
  if (lease) lease->SetUrl(o.public_url.empty() ? address : o.public_url).ok();
  std::thread ports_thread;
  if (ports) {
    auto urls = PortsUrls(o, address, ports_host, ports_port);
    if (!urls) return fail(urls.status(), 2);
    ports->SetUrls(urls->first, urls->second);
    ports_thread = std::thread([&ports] { ports->Serve(); });
    out << "jobs' ports served at " << urls->first << "/jobs/ID/ports/NAME/" << std::endl;
  }
  out << "gantry server listening on " << address << " (store " << RedactDbUrl(db) << ", remote jobs' logs in "
      << data_dir << "/logs)" << std::endl;
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
  if (ports_thread.joinable()) {
    ports->Shutdown();
    ports_thread.join();
  }
  kube.reset();  // its Node watch posts to the controller
  if (local.monitor) local.monitor->Stop();
  if (local.agent) local.agent->Shutdown();
  controller.Stop();
  if (lease) {
    // Nothing more is written: hand the lead over now instead of after the lease (a
    // restart, an upgrade or a drain would otherwise leave no leader for its length).
    keeper.reset();
    if (Status s = lease->Release(); !s.ok()) err << "gantry server: " << s.ToString() << "\n";
  }
  out << "gantry server stopped" << std::endl;
  return 0;
}

}  // namespace gantry
