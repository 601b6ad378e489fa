// libFuzzer: what the Kubernetes API server (or anyone who can write a Node object) hands
// the controller: Node objects read into Gantry node facts, TokenReview answers and pods
// read into an agent's identity, TokenReview answers made into a metrics reader's
// SubjectAccessReview, pods a tenant writes read as Gantry jobs, and a cluster's pods as a
// simulator trace (a List, or one Pod a line). Any JSON, of any shape, must read as facts or
// a refusal, never crash or throw.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/kube_pod.h"
#include "kube/agent_identity.h"
#include "kube/metrics_reader.h"
#include "kube/node_sync.h"
#include "sim/pod_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto trace = gantry::ParsePodTrace(text, gantry::GpuCatalog::Builtin(), false);
  if (trace) (void)trace->jobs.size();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return 0;
  gantry::KubeNodeFacts facts = gantry::NodeFacts(j);
  for (const auto& [k, v] : facts.labels) (void)(k.size() + v.size());
  gantry::KubeAgentPolicy policy;
  auto bound = gantry::PodOfReview(gantry::ObjectAt(j, "status"), policy);
  gantry::BoundPod pod =
      bound ? *bound : gantry::BoundPod{"p", gantry::StringAt(gantry::ObjectAt(j, "metadata"), "uid")};
  auto identity = gantry::IdentityOfPod(j, pod, policy);
  auto access = gantry::AccessReviewFor(gantry::ObjectAt(j, "status"), gantry::KubeMetricsReaderPolicy{});
  if (access) (void)access->dump();
  auto pod_job = gantry::JobOfPod(j, gantry::KubePodPolicy{});
  if (pod_job) (void)pod_job->spec.request.gpus;
  (void)gantry::QuantityMilli(gantry::StringAt(j, "quantity"));
  return identity ? 0 : 0;
}
