// What the server does on Kubernetes: node agents may register with their pod's projected
// service-account token (checked by TokenReview, kube/agent_identity.h), and the cluster's
// Node objects' labels, taints, cordons and deletions reach Gantry's nodes (kube/node_sync.h),
// the leader is where the Service sends traffic (kube/leader_endpoints.h), and a service
// account that RBAC lets read /metrics may scrape it (kube/metrics_reader.h). With pods:
// the pods that ask for Gantry are its jobs (kube/pod_watch.h, pod_binder.h, pod_waits.h).
#pragma once

#include <memory>
#include <string>

#include "cli/server_command.h"
#include "core/status.h"
#include "kube/agent_identity.h"
#include "kube/leader_endpoints.h"
#include "kube/metrics_reader.h"
#include "kube/node_sync.h"
#include "kube/pod_binder.h"
#include "kube/pod_waits.h"
#include "kube/pod_watch.h"
#include "server/controller.h"
#include "server/http_api.h"

namespace gantry {

class KubeServerSide {
 public:
  // Checks the options (the error names the flag) and starts the Node watch; `http` gets
  // the agents' token check and the metrics readers'.
  static Expected<std::unique_ptr<KubeServerSide>> Start(const KubeServerOptions& options, Controller& controller,
                                                         HttpOptions& http);
  ~KubeServerSide();
  std::string Describe() const;
  // With --kube-service: points the Service's Endpoints at this leader (`host` and `port`
  // where it listens) and keeps them there.
  Status PublishLeader(const KubeServerOptions& options, const std::string& host, int port, std::ostream& err);

 private:
  KubeServerSide(KubeConfig config, KubeAgentPolicy policy, const std::string& selector, Controller& controller);
  // With --kube-pods: the pods' watch, binder and reasons (the policy's maps checked).
  Status StartPods(const KubeServerOptions& options);
  Controller& controller_;
  KubeConfig config_;
  KubeAgentVerifier verifier_;
  KubeMetricsReaderVerifier metrics_readers_;
  NodeSync nodes_;
  std::unique_ptr<LeaderEndpoints> endpoints_;
  std::unique_ptr<PodBinder> binder_;
  std::unique_ptr<PodWatch> pods_;
  std::unique_ptr<PodWaitReporter> waits_;
};

}  // namespace gantry
