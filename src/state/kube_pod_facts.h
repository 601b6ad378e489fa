// A Kubernetes pod that asks for Gantry (`schedulerName: gantry`) as the controller gets it:
// the pod read as a job spec (core/kube_pod.h reads it), or why it cannot be one, with what
// the controller needs to keep the pod and its job in step (uid, node, phase, gang).
#pragma once

#include <string>

#include "core/kube_pod.h"
#include "core/status.h"

namespace gantry {

// One pod as the watch saw it: `job` read from it (or why not), and whether it is gone
// (a pod still terminating is not: its job's `deleting` says so).
struct WatchedPod {
  std::string key;  // namespace/name
  std::string ns, name, uid;
  Expected<KubePodJob> job;
  bool deleted = false;
};

// A pending pod's line for Kubernetes: why it waits, in the words of `gantry queue`
// (the PodScheduled condition's message), and a short code that changes only when the
// kind of wait does (an Event is sent then).
struct KubePodWait {
  std::string ns, name, uid;
  std::string code;
  std::string message;
};

// The taint of nodes known only from their Node objects (no Gantry agent runs there): only
// pods, which the kubelet runs, may go there; Gantry's pod jobs tolerate it.
inline constexpr const char* kKubePodsOnlyTaint = "gantry.io/pods-only";

}  // namespace gantry
