// Victim selection for preemption. Given a blocked job and which running jobs it may
// evict, find the GPUs to free at the least cost. On a node, the GPUs with the fewest
// GPU-seconds of lost work (time since each victim's last checkpoint x its GPUs); across
// nodes, the fewest jobs evicted, then the least lost work (as Kubernetes prefers the node
// with the fewest victims before the latest-started ones: each eviction is a job someone
// must wait for again). A gang is evicted whole (its lost work counts once, in full), and
// no victim is kept that is not needed. Jobs already stopping count as free GPUs at no
// cost.
//
// Worked example: an 8-GPU node holds A (4 GPUs, 20 min since its checkpoint: 80
// GPU-minutes to lose), B (2 GPUs, 5 min: 10) and C (2 GPUs, 50 min: 100). A job needs
// 4 GPUs. Per GPU freed, B costs 5, A 20, C 50 GPU-minutes. The cheapest 4 GPUs are B's 2
// and 2 of A's: victims {A, B}, 90 GPU-minutes. The minimality pass then drops B, since A
// alone frees 4 GPUs: A is the only victim, 80 GPU-minutes (B + C would lose 110).
#pragma once

#include <optional>
#include <vector>

#include "sched/cluster_state.h"
#include "sched/demand.h"

namespace gantry {

struct VictimChoice {
  std::vector<size_t> victims;  // running indices to evict (may be empty: wait for stopping ones)
  Placement hold;               // the GPUs the blocked job will take
  double lost_gpu_ms = 0;
};

class VictimFinder {
 public:
  VictimFinder(const ClusterState& state, const Snapshot& snap);

  // `eligible[i]`: running job i may be evicted for this job; `stopping[i]`: job i is
  // already being stopped. Whole GPUs only: a shared or MIG request frees one whole GPU.
  std::optional<VictimChoice> Find(const Demand& d, const std::vector<char>& eligible,
                                   const std::vector<char>& stopping) const;

  // GPU-milliseconds of work job i loses if evicted now.
  double LostWork(size_t running_index) const;

 private:
  struct NodeOption {
    int node = 0;
    uint64_t gpus = 0;
    std::vector<size_t> victims;
    double cost = 0;
  };
  std::optional<NodeOption> CheapestOnNode(int n, int k, const Demand& d, const std::vector<char>& eligible,
                                           const std::vector<char>& stopping) const;
  bool NodeFreeable(int n, int k, const Demand& d, const std::vector<char>& evicted,
                    const std::vector<char>& stopping) const;

  const ClusterState& state_;
  const Snapshot& snap_;
  std::vector<std::vector<size_t>> occupants_;  // per flat GPU: running indices on it
  std::vector<int> flat_;                       // per node: first flat GPU
};

}  // namespace gantry
