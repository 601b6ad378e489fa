// ClusterState: the engine's working copy of who uses what during one cycle, built from
// a snapshot's nodes and running jobs. It keeps per-GPU use (exclusive, time-slice, MPS,
// MIG instances), per-node free CPU and memory, the GPUs held by reservations, and an
// index of nodes by GPU type and number of idle GPUs so placement need not scan them all.
#pragma once

#include <cstdint>
#include <vector>

#include "core/gpu_catalog.h"
#include "sched/plan.h"

namespace gantry {

enum class GpuMode : uint8_t { kIdle, kExclusive, kTimeSlice, kMps, kMig };

struct MigSlot {
  MigPlacement placement;
  bool busy = false;
};

struct GpuUse {
  GpuMode mode = GpuMode::kIdle;
  bool usable = true;  // healthy and not fenced
  bool mig_enabled = false;
  int nvlink_group = 0;
  uint16_t jobs = 0;
  int32_t milli_used = 0;   // time-slice: fractions x 1000; MPS: thread percent x 10
  int64_t memory_used = 0;  // time-slice and MPS shares
  TimeMs busy_until = 0;    // latest expected end of the jobs on it
  std::vector<MigSlot> mig;
};

struct NodeUse {
  GpuTypeId type = 0;
  bool schedulable = false;
  int gpu_count = 0;
  int gpu_begin = 0;       // first GPU in ClusterState::gpus()
  int8_t healthy = 0;      // GPUs healthy and not fenced (whatever jobs or holds they have)
  int8_t healthy_mig = 0;  // of those, in MIG mode
  int free_cpus = 0;
  int64_t free_memory = 0;
  uint64_t idle_mask = 0;  // usable, not in MIG mode, no job
  TimeMs busy_until = 0;   // latest expected end of any job on the node
  // Held by reservations: GPUs, CPUs and memory, and the earliest reservation time.
  uint64_t reserved_mask = 0;
  int reserved_cpus = 0;
  int64_t reserved_memory = 0;
  TimeMs reserved_at = kNever;
};

class ClusterState {
 public:
  ClusterState(const Snapshot& snapshot, const GpuCatalog& catalog);

  const GpuCatalog& catalog() const { return catalog_; }
  const Snapshot& snapshot() const { return snapshot_; }
  const std::vector<NodeUse>& nodes() const { return nodes_; }
  const NodeUse& node(int n) const { return nodes_[n]; }
  const GpuUse& gpu(int n, int g) const { return gpus_[nodes_[n].gpu_begin + g]; }
  GpuUse& mutable_gpu(int n, int g) { return gpus_[nodes_[n].gpu_begin + g]; }
  int max_gpus_per_node(GpuTypeId t) const { return max_gpus_[t]; }
  const std::vector<int>& max_gpus_per_type() const { return max_gpus_; }
  // Per type: the GPUs of nodes that take work.
  const std::vector<int>& schedulable_gpus_per_type() const { return schedulable_gpus_; }

  // Schedulable nodes of type t with exactly `idle` idle GPUs.
  const std::vector<int>& NodesWithIdle(GpuTypeId t, int idle) const { return buckets_[t][idle]; }
  // Schedulable nodes of type t that hold MIG-mode GPUs, or have shared GPUs in use.
  const std::vector<int>& MigNodes(GpuTypeId t) const { return mig_nodes_[t]; }
  const std::vector<int>& SharedNodes(GpuTypeId t) const { return shared_nodes_[t]; }

  // True when no job could start: no idle GPU on a schedulable node, and no GPU that is
  // shared or in MIG mode (which might have room).
  bool Exhausted() const { return idle_total_ == 0 && !has_partial_gpus_; }

  // Takes the resources of `p` for a job expected to end at `end_ms`.
  void Apply(const Placement& p, SharingMode mode, TimeMs end_ms);
  // Holds the resources of `p` for a reservation starting at `at_ms`.
  void Reserve(const Placement& p, TimeMs at_ms);
  // Replaces the MIG instances of a GPU (after planned destroys and creates).
  void SetMigLayout(int n, int g, const std::vector<MigPlacement>& layout);

  // Idle GPUs a job ending at end_ms may take: reserved ones only if it ends before them.
  uint64_t UsableIdle(int n, TimeMs end_ms) const {
    const NodeUse& s = nodes_[n];
    return end_ms > s.reserved_at ? s.idle_mask & ~s.reserved_mask : s.idle_mask;
  }
  int UsableCpus(int n, TimeMs end_ms) const {
    const NodeUse& s = nodes_[n];
    return end_ms > s.reserved_at ? s.free_cpus - s.reserved_cpus : s.free_cpus;
  }
  int64_t UsableMemory(int n, TimeMs end_ms) const {
    const NodeUse& s = nodes_[n];
    return end_ms > s.reserved_at ? s.free_memory - s.reserved_memory : s.free_memory;
  }
  bool GpuReservedFor(int n, int g, TimeMs end_ms) const {
    const NodeUse& s = nodes_[n];
    return end_ms > s.reserved_at && (s.reserved_mask >> g & 1);
  }

 private:
  void Index(int n);
  void Unindex(int n);
  void TakeShare(int n, const GpuShare& share, SharingMode mode, TimeMs end_ms);

  const Snapshot& snapshot_;
  const GpuCatalog& catalog_;
  std::vector<NodeUse> nodes_;
  std::vector<GpuUse> gpus_;
  std::vector<int> max_gpus_;          // per type
  std::vector<int> schedulable_gpus_;  // per type
  // buckets_[type][idle] -> nodes; bucket_pos_[n] is n's position in its bucket.
  std::vector<std::vector<std::vector<int>>> buckets_;
  std::vector<int> bucket_pos_;
  std::vector<std::vector<int>> mig_nodes_;
  std::vector<std::vector<int>> shared_nodes_;
  std::vector<bool> in_shared_;
  int64_t idle_total_ = 0;         // idle GPUs on schedulable nodes
  bool has_partial_gpus_ = false;  // a schedulable node has MIG or shared GPUs
};

}  // namespace gantry
