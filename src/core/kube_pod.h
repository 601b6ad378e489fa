// A Kubernetes pod that asks for Gantry (`schedulerName: gantry`) read as a Gantry job:
// its team from its namespace, its GPUs from `nvidia.com/gpu` or `nvidia.com/mig-<profile>`
// limits or a `gantry.io/gpu-fraction` annotation, its node selector, tolerations, CPUs and
// memory from the spec, its estimate, gang and sharing from `gantry.io/*` annotations and
// labels. Pure and fuzzed: what a tenant writes into a pod is read here, and what Gantry
// cannot honour is refused with the pod's field named, never guessed at.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/job.h"
#include "core/status.h"
#include "server/kube_pod_facts.h"

namespace gantry {

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

// A Kubernetes resource quantity ("500m", "2", "1.5Gi", "128974848", "129e6", "123Mi") in
// thousandths of its unit, rounded up; an error for what is not one or is out of range.
Expected<int64_t> QuantityMilli(const std::string& text);

}  // namespace gantry
