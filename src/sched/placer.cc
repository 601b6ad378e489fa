// Placer: candidate generation from the index, filtering and scoring.
#include "sched/placer.h"

#include <algorithm>
#include <bit>

#include "sched/plugins.h"

namespace gantry {

namespace {

constexpr int kMaxMpsClients = 48;  // per GPU on Volta and later

struct Candidate {
  int node = 0;
  double score = 0;
};

bool Better(const Candidate& a, const Candidate& b) {
  return a.score > b.score || (a.score == b.score && a.node < b.node);
}

}  // namespace

std::optional<PlacementChoice> Placer::Find(const Demand& d, TimeMs end_ms) const {
  if (d.type_mask == 0) return std::nullopt;
  std::optional<PlacementChoice> choice;
  switch (d.mode) {
    case SharingMode::kExclusive: choice = FindWhole(d, end_ms); break;
    case SharingMode::kTimeSlice:
    case SharingMode::kMps:
    case SharingMode::kAuto: return FindShared(d, end_ms);  // sets the mode it chose
    case SharingMode::kMig: choice = FindMig(d, end_ms); break;
  }
  if (choice) choice->placement.sharing = d.mode;
  return choice;
}

Placer::ShareNeed Placer::NeedOn(const Demand& d, int n, const GpuType& type) const {
  const Node& node = state_.snapshot().nodes[n];
  SharingMode mode = d.mode == SharingMode::kAuto ? ResolveSharing(config_.sharing, node, type) : d.mode;
  if (mode == SharingMode::kMps) {  // an MPS job needs a node that can run the daemon
    return {mode, GpuMode::kMps, d.mps_thread_percent * 10, ShareMemory(d, type), false, node.mps};
  }
  if (config_.sharing.time_slice_packing) {
    return {mode, GpuMode::kTimeSlice, d.spec->request.gpu_milli, ShareMemory(d, type), false};
  }
  return {mode, GpuMode::kTimeSlice, kMilliPerGpu, type.memory_mib, true};  // alone on its GPU
}

bool Placer::HostFits(int n, const Demand& d, TimeMs end_ms) const {
  return state_.UsableCpus(n, end_ms) >= d.cpus && state_.UsableMemory(n, end_ms) >= d.memory_mib;
}

NodeShare Placer::HostShare(int n, const Demand& d) const {
  NodeShare ns;
  ns.node = n;
  ns.cpus = d.cpus;
  ns.memory_mib = d.memory_mib;
  return ns;
}

std::optional<PlacementChoice> Placer::FindWhole(const Demand& d, TimeMs end_ms) const {
  const auto& nodes = state_.snapshot().nodes;
  for (const GangShape& shape : d.gang_shapes) {
    const int k = shape.per_node;
    const int want = shape.nodes + config_.candidates_per_type - 1;
    std::vector<Candidate> best;
    double best_total = -1;
    for (size_t rank = 0; rank < d.type_order.size(); ++rank) {
      GpuTypeId t = d.type_order[rank];
      int max_idle = state_.max_gpus_per_node(t);
      if (max_idle < k) continue;
      std::vector<Candidate> found;
      auto consider = [&](int n) {
        const NodeUse& s = state_.node(n);
        if (!PassesStaticFilters(nodes[n], s, d) || !HostFits(n, d, end_ms)) return;
        uint64_t usable = state_.UsableIdle(n, end_ms) & d.gpu_mask;
        int idle = std::popcount(usable);
        if (idle < k) return;
        ScoreInput in;
        in.node = &nodes[n];
        in.state = &s;
        in.demand = &d;
        in.type_rank = static_cast<int>(rank);
        in.fullness_after = 1.0 - static_cast<double>(idle - k) / s.gpu_count;
        ChooseGpus(state_, n, usable, k, &in.single_nvlink_group);
        found.push_back({n, ScoreNode(in, config_)});
      };
      bool pack = config_.strategy == PlacementStrategy::kPack;
      for (int i = 0; i <= max_idle - k && static_cast<int>(found.size()) < want; ++i) {
        int idle = pack ? k + i : max_idle - i;
        for (int n : state_.NodesWithIdle(t, idle)) {
          consider(n);
          if (static_cast<int>(found.size()) >= want) break;
        }
      }
      if (static_cast<int>(found.size()) < shape.nodes) continue;
      std::partial_sort(found.begin(), found.begin() + shape.nodes, found.end(), Better);
      found.resize(shape.nodes);
      double total = 0;
      for (const Candidate& c : found) total += c.score;
      total /= shape.nodes;
      if (total > best_total) {
        best_total = total;
        best = std::move(found);
      }
    }
    if (best.empty()) continue;
    PlacementChoice choice;
    std::sort(best.begin(), best.end(), [](const Candidate& a, const Candidate& b) { return a.node < b.node; });
    for (const Candidate& c : best) {
      NodeShare ns = HostShare(c.node, d);
      bool single = false;
      uint64_t chosen = ChooseGpus(state_, c.node, state_.UsableIdle(c.node, end_ms) & d.gpu_mask, k, &single);
      for (int g = 0; g < state_.node(c.node).gpu_count; ++g) {
        if (chosen >> g & 1) ns.gpus.push_back({.gpu = g});
      }
      choice.placement.nodes.push_back(std::move(ns));
    }
    return choice;
  }
  return std::nullopt;
}

std::optional<PlacementChoice> Placer::FindShared(const Demand& d, TimeMs end_ms) const {
  const auto& nodes = state_.snapshot().nodes;
  int best_node = -1;
  int best_gpu = -1;
  double best_score = -1;
  ShareNeed best_need;
  for (size_t rank = 0; rank < d.type_order.size(); ++rank) {
    GpuTypeId t = d.type_order[rank];
    const GpuType& type = state_.catalog().Get(t);
    auto offer = [&](int n, int g, double gpu_fullness, const ShareNeed& need) {
      const NodeUse& s = state_.node(n);
      ScoreInput in;
      in.node = &nodes[n];
      in.state = &s;
      in.demand = &d;
      in.type_rank = static_cast<int>(rank);
      // The GPU's own fullness decides; the node's present load only breaks ties among idle GPUs.
      double node_load = 1.0 - static_cast<double>(std::popcount(s.idle_mask)) / s.gpu_count;
      in.fullness_after = 0.8 * gpu_fullness + 0.2 * node_load;
      double score = ScoreNode(in, config_);
      if (score > best_score || (score == best_score && (n < best_node || (n == best_node && g < best_gpu)))) {
        best_score = score;
        best_node = n;
        best_gpu = g;
        best_need = need;
      }
    };
    // GPUs already shared in the mode the job gets on that node, with room left.
    for (int n : state_.SharedNodes(t)) {
      if (!PassesStaticFilters(nodes[n], state_.node(n), d) || !HostFits(n, d, end_ms)) continue;
      const ShareNeed need = NeedOn(d, n, type);
      if (need.alone || !need.usable) continue;
      for (int g = 0; g < state_.node(n).gpu_count; ++g) {
        const GpuUse& gs = state_.gpu(n, g);
        if (!(d.gpu_mask >> g & 1)) continue;
        if (gs.mode != need.gpu_mode || !gs.usable || state_.GpuReservedFor(n, g, end_ms)) continue;
        if (gs.milli_used + need.milli > kMilliPerGpu || gs.memory_used + need.memory > type.memory_mib) continue;
        if (need.gpu_mode == GpuMode::kMps && gs.jobs >= kMaxMpsClients) continue;
        offer(n, g, static_cast<double>(gs.milli_used + need.milli) / kMilliPerGpu, need);
      }
    }
    // Idle GPUs, from the fullest nodes (pack) or the emptiest (spread).
    int max_idle = state_.max_gpus_per_node(t);
    int seen = 0;
    bool pack = config_.strategy == PlacementStrategy::kPack;
    for (int i = 0; i < max_idle && seen < config_.candidates_per_type; ++i) {
      int idle = pack ? 1 + i : max_idle - i;
      for (int n : state_.NodesWithIdle(t, idle)) {
        if (!PassesStaticFilters(nodes[n], state_.node(n), d) || !HostFits(n, d, end_ms)) continue;
        uint64_t usable = state_.UsableIdle(n, end_ms) & d.gpu_mask;
        if (!usable) continue;
        const ShareNeed need = NeedOn(d, n, type);
        if (!need.usable) continue;
        offer(n, std::countr_zero(usable), static_cast<double>(need.milli) / kMilliPerGpu, need);
        if (++seen >= config_.candidates_per_type) break;
      }
    }
  }
  if (best_node < 0) return std::nullopt;
  PlacementChoice choice;
  NodeShare ns = HostShare(best_node, d);
  GpuShare share;
  share.gpu = best_gpu;
  const bool mps = best_need.mode == SharingMode::kMps;
  share.milli = mps ? d.spec->request.gpu_milli : best_need.milli;
  share.mps_thread_percent = mps ? d.mps_thread_percent : 0;
  share.memory_mib = best_need.memory;
  ns.gpus.push_back(share);
  choice.placement.nodes.push_back(std::move(ns));
  choice.placement.sharing = best_need.mode;
  return choice;
}

namespace {

// How to host a MIG profile on one GPU: 0 reuse a free instance, 1 create one in free
// slots, 2 re-partition an idle GPU (destroying unused instances that are in the way).
struct MigOption {
  int cost = 3;
  int start = -1;
  std::vector<MigPlacement> destroy;
};

MigOption MigOptionFor(const GpuType& type, const GpuUse& g, int profile) {
  MigOption opt;
  std::vector<MigPlacement> all;
  bool any_busy = false;
  for (const MigSlot& m : g.mig) {
    if (!m.busy && m.placement.profile == profile && opt.cost > 0) {
      opt.cost = 0;
      opt.start = m.placement.start;
    }
    all.push_back(m.placement);
    any_busy = any_busy || m.busy;
  }
  if (opt.cost == 0) return opt;
  if (auto start = FindMigStart(type, all, profile)) {
    opt.cost = 1;
    opt.start = *start;
    return opt;
  }
  if (any_busy) return opt;
  // Idle GPU: destroy the fewest unused instances that block the profile.
  const MigProfile& prof = type.mig_profiles[profile];
  size_t fewest = SIZE_MAX;
  for (int start : prof.starts) {
    uint32_t want = ((1u << prof.memory_slots) - 1u) << start;
    std::vector<MigPlacement> keep;
    std::vector<MigPlacement> drop;
    for (const MigPlacement& p : all) {
      uint32_t mask = ((1u << type.mig_profiles[p.profile].memory_slots) - 1u) << p.start;
      (mask & want ? drop : keep).push_back(p);
    }
    keep.push_back({profile, start});
    if (!MigLayoutValid(type, keep)) {  // compute or count limits: start from scratch
      drop = all;
      keep = {{profile, start}};
      if (!MigLayoutValid(type, keep)) continue;
    }
    if (drop.size() < fewest) {
      fewest = drop.size();
      opt.cost = 2;
      opt.start = start;
      opt.destroy = drop;
    }
  }
  return opt;
}

}  // namespace

std::optional<PlacementChoice> Placer::FindMig(const Demand& d, TimeMs end_ms) const {
  const auto& nodes = state_.snapshot().nodes;
  struct Best {
    int node = -1, gpu = -1;
    double score = -1e18;
    MigOption option;
    int profile = -1;
  } best;
  for (size_t rank = 0; rank < d.type_order.size(); ++rank) {
    GpuTypeId t = d.type_order[rank];
    int profile = d.mig_profile[t];
    if (profile < 0) continue;
    const GpuType& type = state_.catalog().Get(t);
    for (int n : state_.MigNodes(t)) {
      const NodeUse& s = state_.node(n);
      if (!PassesStaticFilters(nodes[n], s, d) || !HostFits(n, d, end_ms)) continue;
      for (int g = 0; g < s.gpu_count; ++g) {
        const GpuUse& gs = state_.gpu(n, g);
        if (!(d.gpu_mask >> g & 1) || !gs.mig_enabled || !gs.usable || state_.GpuReservedFor(n, g, end_ms)) continue;
        MigOption opt = MigOptionFor(type, gs, profile);
        if (opt.cost > 2) continue;
        int busy_compute = 0;
        for (const MigSlot& m : gs.mig) {
          if (m.busy) busy_compute += type.mig_profiles[m.placement.profile].compute_slices;
        }
        ScoreInput in;
        in.node = &nodes[n];
        in.state = &s;
        in.demand = &d;
        in.type_rank = static_cast<int>(rank);
        in.fullness_after =
            static_cast<double>(busy_compute + type.mig_profiles[profile].compute_slices) / type.mig_compute_slices;
        double score = ScoreNode(in, config_) - 1000.0 * opt.cost;
        if (score > best.score) best = {n, g, score, opt, profile};
      }
    }
  }
  if (best.node < 0) return std::nullopt;
  const GpuType& type = state_.catalog().Get(state_.node(best.node).type);
  const MigProfile& prof = type.mig_profiles[best.profile];
  PlacementChoice choice;
  NodeShare ns = HostShare(best.node, d);
  GpuShare share;
  share.gpu = best.gpu;
  share.milli = prof.compute_slices * kMilliPerGpu / type.mig_compute_slices;
  share.memory_mib = prof.memory_mib;
  share.mig_profile = best.profile;
  share.mig_start = best.option.start;
  ns.gpus.push_back(share);
  choice.placement.nodes.push_back(std::move(ns));
  if (best.option.cost > 0) {
    MigChange change;
    change.node = best.node;
    change.gpu = best.gpu;
    change.destroy = best.option.destroy;
    change.create = {{best.profile, best.option.start}};
    change.for_job = d.spec->id;
    choice.mig_changes.push_back(std::move(change));
  }
  return choice;
}

}  // namespace gantry
