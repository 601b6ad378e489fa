// ClusterState: building the working state from a snapshot and keeping its index current.
#include "sched/cluster_state.h"

#include <algorithm>
#include <bit>

namespace gantry {

int Placement::gpu_count() const {
  int n = 0;
  for (const NodeShare& s : nodes) n += static_cast<int>(s.gpus.size());
  return n;
}

TimeMs ExpectedEnd(const JobSpec& spec, TimeMs start_ms, TimeMs now_ms) {
  DurationMs limit = spec.time_limit_ms > 0 ? spec.time_limit_ms : 24 * kHourMs;
  DurationMs plan = spec.predicted_duration_ms > 0 ? spec.predicted_duration_ms : spec.estimated_duration_ms;
  if (plan > 0 && start_ms + plan > now_ms) return start_ms + std::min(plan, limit);
  if (start_ms + limit > now_ms) return start_ms + limit;
  return now_ms + kMinuteMs;
}

TimeMs ExpectedEnd(const RunningJob& job, TimeMs now_ms) {
  return std::min(ExpectedEnd(*job.spec, job.start_ms, now_ms), std::max(job.stop_at_ms, now_ms));
}

ClusterState::ClusterState(const Snapshot& snapshot, const GpuCatalog& catalog)
    : snapshot_(snapshot), catalog_(catalog) {
  const size_t types = catalog.size();
  max_gpus_.assign(types, 0);
  schedulable_gpus_.assign(types, 0);
  mig_nodes_.resize(types);
  shared_nodes_.resize(types);
  nodes_.resize(snapshot.nodes.size());
  bucket_pos_.assign(snapshot.nodes.size(), -1);
  in_shared_.assign(snapshot.nodes.size(), false);
  size_t total_gpus = 0;
  for (const Node& n : snapshot.nodes) total_gpus += n.gpus.size();
  gpus_.reserve(total_gpus);

  for (size_t i = 0; i < snapshot.nodes.size(); ++i) {
    const Node& node = snapshot.nodes[i];
    NodeUse& s = nodes_[i];
    s.type = node.gpu_type();
    s.schedulable = node.schedulable() && !node.gpus.empty();
    s.gpu_begin = static_cast<int>(gpus_.size());
    s.gpu_count = static_cast<int>(node.gpus.size());
    s.free_cpus = node.cpus;
    s.free_memory = node.memory_mib;
    s.busy_until = snapshot.now_ms;
    bool has_mig = false;
    for (const Gpu& g : node.gpus) {
      if (g.health == GpuHealth::kHealthy && !g.fenced) {
        ++s.healthy;
        s.healthy_mig += g.mig_enabled ? 1 : 0;
      }
      GpuUse gs;
      gs.usable = g.health == GpuHealth::kHealthy && !g.fenced &&
                  (snapshot.held_back_gpus.empty() || !snapshot.held_back_gpus.count({static_cast<int>(i), g.index}));
      gs.mig_enabled = g.mig_enabled;
      gs.nvlink_group = g.nvlink_group;
      gs.busy_until = snapshot.now_ms;
      for (const MigInstance& m : g.mig_instances) gs.mig.push_back({m.placement, false});
      if (gs.mig_enabled) {
        gs.mode = GpuMode::kMig;
        has_mig = has_mig || gs.usable;
      } else if (gs.usable) {
        s.idle_mask |= uint64_t{1} << (gpus_.size() - s.gpu_begin);
      }
      gpus_.push_back(std::move(gs));
    }
    if (s.type < types) max_gpus_[s.type] = std::max(max_gpus_[s.type], s.gpu_count);
    if (s.type < types && s.schedulable) schedulable_gpus_[s.type] += s.gpu_count;
    if (s.schedulable && has_mig) {
      mig_nodes_[s.type].push_back(static_cast<int>(i));
      has_partial_gpus_ = true;
    }
  }
  buckets_.assign(types, {});
  for (size_t t = 0; t < types; ++t) buckets_[t].resize(max_gpus_[t] + 1);

  for (const RunningJob& job : snapshot.running) {
    bool valid = true;
    for (const NodeShare& ns : job.placement.nodes) {
      if (ns.node < 0 || ns.node >= static_cast<int>(nodes_.size())) valid = false;
    }
    if (!valid) continue;  // a job on a node that left the snapshot holds nothing here
    TimeMs end = ExpectedEnd(job, snapshot.now_ms);
    for (const NodeShare& ns : job.placement.nodes) {
      NodeUse& s = nodes_[ns.node];
      s.free_cpus -= ns.cpus;
      s.free_memory -= ns.memory_mib;
      s.busy_until = std::max(s.busy_until, end);
      for (const GpuShare& share : ns.gpus) {
        if (share.gpu >= 0 && share.gpu < s.gpu_count)
          TakeShare(ns.node, share, HeldSharing(*job.spec, job.placement), end);
      }
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].schedulable) Index(static_cast<int>(i));
  }
}

void ClusterState::Index(int n) {
  NodeUse& s = nodes_[n];
  idle_total_ += std::popcount(s.idle_mask);
  auto& bucket = buckets_[s.type][std::popcount(s.idle_mask)];
  bucket_pos_[n] = static_cast<int>(bucket.size());
  bucket.push_back(n);
}

void ClusterState::Unindex(int n) {
  if (bucket_pos_[n] < 0) return;
  NodeUse& s = nodes_[n];
  idle_total_ -= std::popcount(s.idle_mask);
  auto& bucket = buckets_[s.type][std::popcount(s.idle_mask)];
  int pos = bucket_pos_[n];
  bucket[pos] = bucket.back();
  bucket_pos_[bucket[pos]] = pos;
  bucket.pop_back();
  bucket_pos_[n] = -1;
}

void ClusterState::TakeShare(int n, const GpuShare& share, SharingMode mode, TimeMs end_ms) {
  NodeUse& s = nodes_[n];
  GpuUse& g = gpus_[s.gpu_begin + share.gpu];
  g.jobs++;
  g.busy_until = std::max(g.busy_until, end_ms);
  s.idle_mask &= ~(uint64_t{1} << share.gpu);
  switch (mode) {
    case SharingMode::kExclusive:
      g.mode = GpuMode::kExclusive;
      g.milli_used = kMilliPerGpu;
      break;
    case SharingMode::kTimeSlice:
    case SharingMode::kMps:
    case SharingMode::kAuto:  // never in a placement; counted as a time-slice share
      g.mode = mode == SharingMode::kMps ? GpuMode::kMps : GpuMode::kTimeSlice;
      g.milli_used += mode == SharingMode::kMps ? share.mps_thread_percent * 10 : share.milli;
      g.memory_used += share.memory_mib;
      if (s.schedulable) has_partial_gpus_ = true;
      if (s.schedulable && !in_shared_[n]) {
        in_shared_[n] = true;
        shared_nodes_[s.type].push_back(n);
      }
      break;
    case SharingMode::kMig:
      for (MigSlot& m : g.mig) {
        if (m.placement.profile == share.mig_profile && m.placement.start == share.mig_start) m.busy = true;
      }
      break;
  }
}

void ClusterState::Apply(const Placement& p, SharingMode mode, TimeMs end_ms) {
  for (const NodeShare& ns : p.nodes) {
    Unindex(ns.node);
    NodeUse& s = nodes_[ns.node];
    s.free_cpus -= ns.cpus;
    s.free_memory -= ns.memory_mib;
    s.busy_until = std::max(s.busy_until, end_ms);
    for (const GpuShare& share : ns.gpus) TakeShare(ns.node, share, mode, end_ms);
    if (s.schedulable) Index(ns.node);
  }
}

void ClusterState::Reserve(const Placement& p, TimeMs at_ms) {
  for (const NodeShare& ns : p.nodes) {
    NodeUse& s = nodes_[ns.node];
    for (const GpuShare& share : ns.gpus) s.reserved_mask |= uint64_t{1} << share.gpu;
    s.reserved_cpus += ns.cpus;
    s.reserved_memory += ns.memory_mib;
    s.reserved_at = std::min(s.reserved_at, at_ms);
  }
}

void ClusterState::SetMigLayout(int n, int g, const std::vector<MigPlacement>& layout) {
  GpuUse& gs = mutable_gpu(n, g);
  std::vector<MigSlot> next;
  for (const MigPlacement& p : layout) {
    bool busy = false;
    for (const MigSlot& old : gs.mig) {
      if (old.placement == p) busy = old.busy;
    }
    next.push_back({p, busy});
  }
  gs.mig = std::move(next);
}

}  // namespace gantry
