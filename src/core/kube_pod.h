// A Kubernetes pod that asks for Gantry (`schedulerName: gantry`) read as a Gantry job:
// its team from its namespace, its GPUs from `nvidia.com/gpu` or `nvidia.com/mig-<profile>`
// limits or a `gantry.io/gpu-fraction` annotation, its node selector, tolerations, CPUs and
// memory from the spec, its estimate, gang and sharing from `gantry.io/*` annotations and
// labels; and a gang's pods as its one job. Pure and fuzzed: what a tenant writes into a
// pod is read here, and what Gantry cannot honour is refused with the pod's field named,
// never guessed at. The controller (--kube-pods) and the simulator (pod traces) read pods
// through this one reader.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/job.h"
#include "core/status.h"
#include "core/time.h"

namespace gantry {

struct KubePodJob {
  std::string ns, name, uid;
  std::string node;          // spec.nodeName: bound already (by Gantry, or before it ran)
  std::string phase;         // status.phase
  std::string ended_reason;  // why it ended (status.reason or the container's termination reason)
  int exit_code = 0;         // the first non-zero exit code of its containers once it ended
  bool deleting = false;
  TimeMs deletion_ms = -1;        // metadata.deletionTimestamp: when its grace period is over (-1: none)
  bool containers_ended = false;  // every container's state is terminated: the kubelet stopped them
  // Pods of one gang are placed together or not at all: its name ("" for none) and the
  // members it needs (0: not said).
  std::string gang;
  int gang_min_members = 0;
  JobSpec spec;
  bool Ended() const { return phase == "Succeeded" || phase == "Failed"; }
  std::string key() const { return ns + "/" + name; }
};

// A pod job's member as its JobSpec names it: "namespace/name/uid".
std::string PodRef(const KubePodJob& pod);
struct PodRefParts {
  std::string ns, name, uid;
  std::string key() const { return ns + "/" + name; }
};
PodRefParts SplitPodRef(const std::string& ref);  // all empty when `ref` is not one

struct KubePodPolicy {
  std::string scheduler_name = "gantry";
  // Namespace to team; a namespace not listed is the team of its own name. The namespace is
  // what Kubernetes RBAC fences, so a pod's own labels never choose its team.
  std::map<std::string, std::string> namespace_teams;
  // PriorityClass name to Gantry priority class; a class not listed: Gantry's default.
  std::map<std::string, std::string> priority_classes;
};

// Whether `pod` names `policy.scheduler_name` as its scheduler.
bool WantsGantry(const nlohmann::json& pod, const KubePodPolicy& policy);

// The pod as a job, or why it cannot be one (the field is the pod's: spec.containers[0]...
// or metadata.annotations[gantry.io/gpu-fraction]).
Expected<KubePodJob> JobOfPod(const nlohmann::json& pod, const KubePodPolicy& policy);

// The pods of a gang (or one pod alone) as the one job Gantry places: each member one
// node's equal part (`num_nodes` members, their GPUs summed), named NAMESPACE/GANG, its
// members in `kube_pods`; or why they cannot be one (field "gang").
Expected<JobSpec> JobOfGang(const std::vector<KubePodJob>& members);

// The GPU type of a product name as GPU Feature Discovery writes it (nvidia.com/gpu.product,
// "NVIDIA-A100-SXM4-80GB": dashes for spaces) or as gpu_types.yaml names it; null if none.
const GpuType* TypeOfProduct(const GpuCatalog& catalog, const std::string& product);

// A Kubernetes resource quantity ("500m", "2", "1.5Gi", "128974848", "129e6", "123Mi") in
// thousandths of its unit, rounded up; an error for what is not one or is out of range.
Expected<int64_t> QuantityMilli(const std::string& text);

}  // namespace gantry
