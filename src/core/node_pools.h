// Node pools: groups of identical nodes that the autoscaler adds and returns (pools.yaml in
// the config directory, or `pools:` in a simulator's cluster file). Each pool has one GPU
// type and size, labels and taints for its nodes, on-demand or spot capacity, a minimum and
// a maximum size, a price, and the two hook commands that ask a cloud for nodes and give
// them back (in the manner of Slurm's ResumeProgram and SuspendProgram).
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/node.h"
#include "core/status.h"
#include "core/time.h"

namespace gantry {

enum class Capacity : uint8_t { kOnDemand, kSpot };
// The label of a node from a spot pool ("spot"): only preemptible work runs there.
inline constexpr const char* kCapacityLabel = "gantry.io/capacity";
const char* ToString(Capacity c);

struct NodePool {
  std::string name;
  GpuTypeId type = 0;
  int gpus_per_node = 8;
  int cpus = 0;                               // per node; 0: not limiting
  int64_t memory_mib = 0;                     // per node; 0: not limiting
  std::map<std::string, std::string> labels;  // each node's; `pool: NAME` is always added
  std::vector<Taint> taints;
  Capacity capacity = Capacity::kOnDemand;
  int min_nodes = 0;
  int max_nodes = 0;
  double price_per_gpu_hour = -1;  // < 0: the GPU type's on-demand or spot price
  // Hooks: scale_up_command gets the pool name and a count and prints one node id per
  // line; its exit code 3 means "no capacity" (any other non-zero: a failure).
  // scale_down_command gets the pool name and node ids. Empty: the pool is not scaled by
  // the controller (its nodes come and go by hand); the simulator needs no hooks.
  std::string scale_up_command;
  std::string scale_down_command;
  DurationMs startup_ms = 3 * kMinuteMs;   // from a request to the node's registration (expected)
  double spot_reclaims_per_node_hour = 0;  // the simulator's reclaim rate (spot pools)
  // The simulator's recorded reclaims (spot pools): `spot_reclaim_trace`, a file of times
  // from the trace's start, one reclaim of the pool's longest-up node each
  // (LoadClusterPools reads it, relative to the cluster file).
  std::string spot_reclaim_trace;
  std::vector<DurationMs> reclaim_times;

  // What one GPU-hour of this pool costs.
  double PricePerGpuHour(const GpuCatalog& catalog) const;
};

struct AutoscalerConfig {
  std::vector<NodePool> pools;
  DurationMs scale_up_after = 30 * kSecondMs;      // a job waits this long before it asks for nodes
  DurationMs scale_down_after = 10 * kMinuteMs;    // an idle node above the minimum is returned after this
  DurationMs register_timeout = 10 * kMinuteMs;    // a requested node that never registers is given up
  DurationMs spot_fallback_after = 5 * kMinuteMs;  // a spot pool's "no capacity": on-demand after this
  DurationMs hook_timeout = 60 * kSecondMs;        // a hook that runs longer is killed (a failure)

  bool enabled() const { return !pools.empty(); }
  const NodePool* Find(const std::string& name) const;
};

// Reads `{autoscaler: {...}, pools: [...]}` (pools.yaml); errors name the field, e.g.
// "pools[1].max_nodes". `where` prefixes the field paths (a cluster file's "pools").
Expected<AutoscalerConfig> ParseAutoscalerConfig(const YAML::Node& root, const GpuCatalog& catalog,
                                                 const std::string& where = "");
Expected<AutoscalerConfig> ParseAutoscalerYaml(const std::string& text, const GpuCatalog& catalog);

}  // namespace gantry
