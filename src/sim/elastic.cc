// Elastic node pools in the simulator: nodes asked for by the autoscaler's decision come
// up after their pool's start-up time, spot nodes are reclaimed at random (their jobs
// evicted), idle nodes go back, and each node is billed from its request to its return.
#include <fmt/format.h>

#include <algorithm>

#include "sim/simulation.h"

namespace gantry::sim_internal {

// Node-hours and costs per pool (nodes still there are billed to the end), the fixed
// nodes at on-demand prices, an always-on cluster of each pool's peak at on-demand prices,
// and what spot saved.
void Simulation::SummarizePools(SimResult& r) {
  const GpuCatalog& catalog = config_.catalog;
  const double span_h = static_cast<double>(last_t_ - t0_) / kHourMs;
  double fixed = 0;
  for (size_t n = 0; n < slots_.size(); ++n) {
    if (slots_[n].pool < 0) {
      for (const Gpu& g : snap_.nodes[n].gpus) fixed += catalog.Get(g.type).price_on_demand * span_h;
    } else if (slots_[n].state == Slot::kRequested || slots_[n].state == Slot::kUp) {
      pool_metrics_[static_cast<size_t>(slots_[n].pool)].node_hours +=
          static_cast<double>(last_t_ - slots_[n].requested_at) / kHourMs;
    }
  }
  r.cost = r.always_on_cost = fixed;
  for (size_t p = 0; p < pool_metrics_.size(); ++p) {
    const NodePool& pool = options_.autoscaler.pools[p];
    PoolMetrics& m = pool_metrics_[p];
    const double on_demand = catalog.Get(pool.type).price_on_demand;
    m.gpu_hours = m.node_hours * pool.gpus_per_node;
    m.cost = m.gpu_hours * pool.PricePerGpuHour(catalog);
    r.cost += m.cost;
    r.always_on_cost += m.peak_nodes * pool.gpus_per_node * span_h * on_demand;
    if (pool.capacity == Capacity::kSpot) r.spot_saving += m.gpu_hours * on_demand - m.cost;
  }
  r.pools = pool_metrics_;
}

// The autoscaler's decision on the last cycle's waiting jobs and the pools' nodes.
void Simulation::Autoscale() {
  const AutoscalerConfig& config = options_.autoscaler;
  std::vector<PoolStatus> status(config.pools.size());
  for (size_t n = 0; n < slots_.size(); ++n) {
    const NodeSlot& slot = slots_[n];
    if (slot.pool < 0) continue;
    PoolStatus& ps = status[static_cast<size_t>(slot.pool)];
    if (slot.state == Slot::kRequested) ps.requested++;
    if (slot.state != Slot::kUp) continue;
    ps.up++;
    if (slot.idle_since != kNever) ps.idle.push_back({snap_.nodes[n].id, slot.idle_since});
  }
  ScalingPlan plan = PlanScaling(config, config_.catalog, status, demand_, snap_.now_ms);
  quiet_ticks_ = plan.add.empty() && plan.remove.empty() ? quiet_ticks_ + 1 : 0;
  for (const auto& [pool, count] : plan.add) {
    for (int i = 0; i < count; ++i) RequestNode(pool);
  }
  for (const std::string& id : plan.remove) {
    for (size_t n = 0; n < slots_.size(); ++n) {
      if (slots_[n].pool >= 0 && slots_[n].state == Slot::kUp && snap_.nodes[n].id == id) ReturnNode(n);
    }
  }
}

// A node of `pool`, asked for now: the slot of a node returned earlier, or a new one. It
// takes no job until it is up.
void Simulation::RequestNode(size_t pool) {
  const NodePool& p = options_.autoscaler.pools[pool];
  size_t n = 0;
  while (n < slots_.size() && !(slots_[n].pool == static_cast<int>(pool) && slots_[n].state == Slot::kGone)) ++n;
  if (n == slots_.size()) {
    Node node = pool_shapes_[pool];
    node.id = fmt::format("{}-{}", p.name, pool_metrics_[pool].nodes_requested);
    for (Gpu& g : node.gpus) g.uuid = fmt::format("GPU-{}-{}", node.id, g.index);
    node.state = NodeState::kDown;
    node_gpu_offset_.push_back(static_cast<int>(gpu_jobs_.size()));
    gpu_jobs_.resize(gpu_jobs_.size() + node.gpus.size(), 0);
    snap_.nodes.push_back(std::move(node));
    NodeSlot fresh;
    fresh.pool = static_cast<int>(pool);
    slots_.push_back(fresh);
  }
  NodeSlot& slot = slots_[n];
  slot.state = Slot::kRequested;
  slot.requested_at = snap_.now_ms;
  slot.idle_since = kNever;
  ++slot.incarnation;
  pool_metrics_[pool].nodes_requested++;
  pool_metrics_[pool].peak_nodes = std::max(pool_metrics_[pool].peak_nodes, ++pool_live_[pool]);
  events_queue_.push({snap_.now_ms + p.startup_ms, n, slot.incarnation, EventKind::kNodeUp});
}

void Simulation::NodeUp(size_t n) {
  NodeSlot& slot = slots_[n];
  if (slot.state != Slot::kRequested) return;
  const NodePool& p = options_.autoscaler.pools[static_cast<size_t>(slot.pool)];
  slot.state = Slot::kUp;
  slot.idle_since = snap_.now_ms;
  snap_.nodes[n].state = NodeState::kUp;
  idle_gpus_ += p.gpus_per_node;
  live_gpus_ += p.gpus_per_node;
  peak_gpus_ = std::max(peak_gpus_, static_cast<int>(live_gpus_));
  if (p.spot_reclaims_per_node_hour > 0) {
    std::exponential_distribution<double> wait(p.spot_reclaims_per_node_hour / kHourMs);
    events_queue_.push(
        {snap_.now_ms + 1 + static_cast<TimeMs>(wait(reclaim_rng_)), n, slot.incarnation, EventKind::kReclaim});
  }
}

// An idle node goes back: its hours are billed from its request on.
void Simulation::ReturnNode(size_t n) {
  NodeSlot& slot = slots_[n];
  const size_t pool = static_cast<size_t>(slot.pool);
  const NodePool& p = options_.autoscaler.pools[pool];
  if (slot.state == Slot::kUp) {
    idle_gpus_ -= p.gpus_per_node;
    live_gpus_ -= p.gpus_per_node;
  }
  pool_metrics_[pool].node_hours += static_cast<double>(snap_.now_ms - slot.requested_at) / kHourMs;
  pool_metrics_[pool].nodes_returned++;
  --pool_live_[pool];
  slot.state = Slot::kGone;
  slot.idle_since = kNever;
  ++slot.incarnation;
  snap_.nodes[n].state = NodeState::kDown;
}

// The cloud takes a spot node back: its jobs are evicted (they keep the work up to their
// last checkpoint and requeue), and the node is gone.
void Simulation::Reclaim(size_t n) {
  if (slots_[n].state != Slot::kUp) return;
  std::vector<size_t> victims;
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    for (const NodeShare& ns : snap_.running[i].placement.nodes) {
      if (static_cast<size_t>(ns.node) == n) victims.push_back(running_job_[i]);
    }
  }
  for (size_t job : victims) Stop(job);
  pool_metrics_[static_cast<size_t>(slots_[n].pool)].reclaims++;
  ReturnNode(n);
}

void Simulation::ReclaimFromTrace(size_t pool) {
  size_t longest = slots_.size();
  for (size_t n = 0; n < slots_.size(); ++n) {
    if (slots_[n].pool != static_cast<int>(pool) || slots_[n].state != Slot::kUp) continue;
    if (longest == slots_.size() || slots_[n].requested_at < slots_[longest].requested_at) longest = n;
  }
  if (longest < slots_.size()) Reclaim(longest);
}

void Simulation::TouchNode(size_t n) {
  NodeSlot& slot = slots_[n];
  if (slot.state != Slot::kUp) return;
  bool idle = true;
  for (size_t g = 0; g < snap_.nodes[n].gpus.size() && idle; ++g) idle = gpu_jobs_[node_gpu_offset_[n] + g] == 0;
  if (!idle) {
    slot.idle_since = kNever;
  } else if (slot.idle_since == kNever) {
    slot.idle_since = snap_.now_ms;
  }
}

// The autoscaler looks again every scale_up_after (at least a minute) while there is
// something it may do: more jobs or events to come, pool nodes above their minimum, or
// jobs waiting (until a few ticks in a row change nothing: then nothing more will).
void Simulation::ScheduleScaleTick(bool more_to_come) {
  if (scale_tick_at_ != kNever) return;
  bool reason = more_to_come || !events_queue_.empty() || (Waiting() > 0 && quiet_ticks_ < 5);
  for (size_t p = 0; p < pool_live_.size() && !reason; ++p) {
    reason = pool_live_[p] > options_.autoscaler.pools[p].min_nodes;
  }
  if (!reason) return;
  scale_tick_at_ = snap_.now_ms + std::max<DurationMs>(options_.autoscaler.scale_up_after, kMinuteMs);
  events_queue_.push({scale_tick_at_, 0, 0, EventKind::kScale});
}

}  // namespace gantry::sim_internal
