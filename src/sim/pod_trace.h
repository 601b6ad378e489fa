// Kubernetes pods as a simulator trace: what `kubectl get pods -A -o json` prints of a
// cluster (a List), or one Pod object per line. Each pod is read by the controller's own
// reader (core/kube_pod.h), so it replays as the job Gantry would make of it, and a gang's
// pods as its one job. A pod arrives at its creationTimestamp and runs as long as it ran:
// status.startTime to its containers' last finishedAt. Pods that had not ended when the
// trace was taken, or that ask for no GPU, are skipped with the reason.
#pragma once

#include <string>

#include "core/gpu_catalog.h"
#include "sim/trace.h"

namespace gantry {

// A GPU model asked for with a node selector (nvidia.com/gpu.product, gantry.io/gpu-type)
// becomes the job's GPU type in `catalog`; the other node labels of the traced cluster are
// not the simulated one's, so its other selectors and tolerations are left out.
Expected<Trace> ParsePodTrace(const std::string& text, const GpuCatalog& catalog, bool strict);
Expected<Trace> LoadPodTrace(const std::string& path, const GpuCatalog& catalog, bool strict);

}  // namespace gantry
