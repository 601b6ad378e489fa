// Cluster nodes and their GPUs as the scheduler sees them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_catalog.h"

namespace gantry {

enum class NodeState : uint8_t { kUp, kDraining, kDrained, kDown };
enum class GpuHealth : uint8_t { kHealthy, kUnhealthy };

const char* ToString(NodeState s);

// A node id: 1-128 letters, digits and . _ -, starting with a letter or digit, so an id
// handed to a hook or a command line is data, never an option ("--dry-run").
bool IsNodeId(std::string_view id);
inline constexpr const char* kNodeIdRule = "1-128 letters, digits and . _ -, starting with a letter or digit";

// A MIG instance that exists on a GPU (created earlier, by an admin or by Gantry).
struct MigInstance {
  MigPlacement placement;
  std::string uuid;  // MIG-<uuid> once the agent created it; empty in plans and fakes
};

struct Gpu {
  int index = 0;
  std::string uuid;
  GpuTypeId type = 0;
  GpuHealth health = GpuHealth::kHealthy;
  bool fenced = false;       // an admin drained this one GPU
  int nvlink_group = 0;      // GPUs with the same group talk over NVLink
  bool mig_enabled = false;  // in MIG mode only MIG requests may use it
  std::vector<MigInstance> mig_instances;
};

// A taint keeps jobs off a node unless they tolerate it (key=value, e.g. dedicated=inference).
struct Taint {
  std::string key;
  std::string value;
  bool operator==(const Taint&) const = default;
};

// Whether every taint is tolerated (an empty toleration value tolerates any value of its key).
inline bool Tolerated(const std::vector<Taint>& taints, const std::vector<Taint>& tolerations) {
  for (const Taint& taint : taints) {
    bool ok = false;
    for (const Taint& tol : tolerations) ok |= tol.key == taint.key && (tol.value.empty() || tol.value == taint.value);
    if (!ok) return false;
  }
  return true;
}

// Where a node's jobs are reached: the address its agent gives (a name or IP that other
// nodes and users resolve: a gang's MASTER_ADDR, the host of a job's port URLs) and the
// TCP ports it lends to jobs (MASTER_PORT, named ports such as a notebook's).
struct NodeNetwork {
  std::string address;  // empty: the node id
  int port_first = 20000;
  int port_last = 29999;
};
// "20000-29999" (within 1024..65535, first <= last); false otherwise.
bool ParsePortRange(const std::string& text, int* first, int* last);
// The address: a host name or IPv4/IPv6 address (letters, digits, . - :), at most 253
// characters; the range as ParsePortRange takes it. `field` names the setting in errors.
Status ValidateNodeNetwork(const NodeNetwork& network, const std::string& field);

struct Node {
  std::string id;
  std::vector<Gpu> gpus;  // one GPU model per node
  int cpus = 0;
  int64_t memory_mib = 0;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  NodeState state = NodeState::kUp;
  bool mps = false;                // its agent can run MPS control daemons (fractions may use MPS here)
  bool containers = true;          // its agent's probe container ran: container jobs may go here
  std::string containers_problem;  // why they may not (the probe's error)
  NodeNetwork network;
  const std::string& address() const { return network.address.empty() ? id : network.address; }

  bool schedulable() const { return state == NodeState::kUp; }
  GpuTypeId gpu_type() const { return gpus.empty() ? 0 : gpus.front().type; }
};

// Checks a node: GPUs of one model, indexed 0..n-1 in order (a GpuShare's gpu is that
// index), at most 64 GPUs, MIG layouts valid.
Status ValidateNode(const Node& node, const GpuCatalog& catalog);

}  // namespace gantry
