// The server's Kubernetes side: its configuration, the agents' token check and the Node watch.
#include "cli/server_kube.h"

#include <fmt/format.h>

#include <cstdlib>

namespace gantry {

KubeServerSide::KubeServerSide(KubeConfig config, KubeAgentPolicy policy, const std::string& selector,
                               Controller& controller)
    : controller_(controller),
      config_(config),
      verifier_(config, policy),
      metrics_readers_(config, KubeMetricsReaderPolicy{config.ns.empty() ? policy.ns : config.ns}),
      nodes_(
          config, selector,
          [&controller](const std::string& node, const KubeNodeFacts& facts) { controller.ApplyKubeNode(node, facts); },
          [&controller](const std::vector<std::pair<std::string, KubeNodeFacts>>& nodes) {
            controller.ApplyKubeNodes(nodes);
          }) {}

KubeServerSide::~KubeServerSide() {
  endpoints_.reset();
  nodes_.Stop();
  if (pods_) pods_->Stop();
  if (waits_) waits_->Stop();
  if (binder_) {
    // No order goes to the binder after this; those already on their way are carried out
    // by the commit after the next (the committer sends each commit's orders in turn).
    controller_.SetPodLink(nullptr);
    controller_.Sync();
  }
}

Status KubeServerSide::StartPods(const KubeServerOptions& o) {
  KubePodPolicy policy;
  policy.scheduler_name = o.scheduler_name;
  auto pairs = [](const std::vector<std::string>& list, const char* flag, std::map<std::string, std::string>* out) {
    for (const std::string& item : list) {
      size_t eq = item.find('=');
      if (eq == 0 || eq == std::string::npos || eq + 1 == item.size()) {
        return Status::Invalid(flag, fmt::format("expected NAME=VALUE, got '{}'", item));
      }
      (*out)[item.substr(0, eq)] = item.substr(eq + 1);
    }
    return Status::Ok();
  };
  if (Status s = pairs(o.namespace_teams, "--kube-namespace-team", &policy.namespace_teams); !s.ok()) return s;
  if (Status s = pairs(o.priority_classes, "--kube-priority-class", &policy.priority_classes); !s.ok()) return s;
  if (policy.scheduler_name.empty() || policy.scheduler_name.size() > 253) {
    return Status::Invalid("--kube-scheduler-name", "is a scheduler's name (1-253 characters)");
  }
  Controller& controller = controller_;
  binder_ = std::make_unique<PodBinder>(config_, controller, static_cast<DurationMs>(o.eviction_wait_s * 1000));
  controller.SetPodLink(binder_.get());
  pods_ = std::make_unique<PodWatch>(
      config_, policy, [&controller](const WatchedPod& pod) { controller.ApplyKubePod(pod); },
      [&controller](const std::vector<WatchedPod>& pods) { controller.ApplyKubePods(pods); });
  waits_ = std::make_unique<PodWaitReporter>(config_, [&controller] { return controller.KubePodWaits(); });
  pods_->Start();
  waits_->Start();
  return Status::Ok();
}

namespace {

// A namespace or Service name as Kubernetes allows them (RFC 1123 label): it goes into a URL.
bool DnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}

}  // namespace

Status KubeServerSide::PublishLeader(const KubeServerOptions& o, const std::string& host, int port, std::ostream& err) {
  if (o.service.empty()) return Status::Ok();
  LeaderAddress a;
  a.port = port;
  size_t slash = o.service.find('/');
  a.ns = slash == std::string::npos ? config_.ns : o.service.substr(0, slash);
  a.service = slash == std::string::npos ? o.service : o.service.substr(slash + 1);
  if (!DnsLabel(a.ns) || !DnsLabel(a.service))
    return Status::Invalid(
        "--kube-service", "expected [NAMESPACE/]NAME (NAMESPACE is needed outside a cluster), got '" + o.service + "'");
  const char* env_ip = std::getenv("POD_IP");
  a.ip = !o.pod_ip.empty() ? o.pod_ip : env_ip && *env_ip ? env_ip : host;
  if (a.ip.empty() || a.ip == "0.0.0.0" || a.ip == "::" ||
      a.ip.find_first_not_of("0123456789abcdefABCDEF.:") != std::string::npos)
    return Status::Invalid("--kube-pod-ip",
                           "this pod's IP is needed (set POD_IP from status.podIP), got '" + a.ip + "'");
  if (a.ip.rfind("127.", 0) == 0 || a.ip == "::1")
    return Status::Invalid("--kube-pod-ip",
                           "'" + a.ip + "' is a loopback address, which Endpoints may not hold (set POD_IP)");
  const char* env_name = std::getenv("POD_NAME");
  a.pod = !o.pod_name.empty() ? o.pod_name : env_name ? env_name : "";
  if (a.pod.size() > 253 || a.pod.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") != std::string::npos)
    return Status::Invalid("--kube-pod-name", "'" + a.pod + "' is not a pod's name");
  endpoints_ = std::make_unique<LeaderEndpoints>(config_, a, err);
  endpoints_->Start();
  return Status::Ok();
}

Expected<std::unique_ptr<KubeServerSide>> KubeServerSide::Start(const KubeServerOptions& o, Controller& controller,
                                                                HttpOptions& http) {
  KubeConfig config;
  if (o.in_cluster) {
    auto in = KubeConfig::InCluster();
    if (!in) return Status::Precondition("--kube", in.status().message());
    config = *in;
  } else {
    if (o.api.rfind("https://", 0) != 0) return Status::Invalid("--kube-api", "must be an https:// URL");
    if (o.token_file.empty()) return Status::Invalid("--kube-token-file", "is needed with --kube-api");
    if (o.ca.empty()) return Status::Invalid("--kube-ca", "is needed with --kube-api (the API server's CA)");
    config.url = o.api;
    config.ca_file = o.ca;
    config.token_file = o.token_file;
  }
  KubeAgentPolicy policy;
  size_t slash = o.agents.find('/');
  if (slash == 0 || slash == std::string::npos || slash + 1 == o.agents.size() ||
      o.agents.find('/', slash + 1) != std::string::npos) {
    return Status::Invalid("--kube-agents", "expected NAMESPACE/SERVICEACCOUNT, got '" + o.agents + "'");
  }
  policy.ns = o.agents.substr(0, slash);
  policy.service_account = o.agents.substr(slash + 1);
  policy.limits.valid_for = std::chrono::milliseconds(static_cast<int64_t>(o.token_cache_s * 1000));
  std::unique_ptr<KubeServerSide> side(new KubeServerSide(config, policy, o.node_selector, controller));
  KubeAgentVerifier* verifier = &side->verifier_;
  http.agent_token_plausible = [](std::string_view token) {
    return KubeAgentVerifier::LooksLikeJwt(std::string(token));
  };
  http.verify_agent_token = [verifier](const std::string& token, const std::string& client) -> Expected<Actor> {
    auto id = verifier->Verify(token, client);
    if (!id) return id.status();
    Actor agent;
    agent.user = "kube:" + id->pod;
    agent.team = "";
    agent.role = Role::kAgent;
    agent.node = id->node;
    return agent;
  };
  KubeMetricsReaderVerifier* readers = &side->metrics_readers_;
  http.verify_metrics_reader = [readers](const std::string& token, const std::string& client) -> Expected<std::string> {
    if (!KubeTokenVerifier::LooksLikeJwt(token)) return Status(StatusCode::kUnauthenticated, "the token is not valid");
    auto reader = readers->Verify(token, client);
    if (!reader) return reader.status();
    return reader->user;
  };
  if (o.pods) {
    // Before the Node watch: a Node with GPUs and no agent becomes a node for pods.
    if (Status s = side->StartPods(o); !s.ok()) return s;
  }
  side->nodes_.Start();
  return side;
}

std::string KubeServerSide::Describe() const {
  return fmt::format(
      "kubernetes: API {}; agents register with their pods' service-account tokens; Node objects "
      "watched; service accounts that RBAC lets get /metrics may read it{}",
      config_.url, pods_ ? "; Gantry schedules the pods that name it as their scheduler" : "");
}

}  // namespace gantry
