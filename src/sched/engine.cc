// Engine::Schedule: the scheduling cycle.
#include "sched/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "sched/cluster_state.h"
#include "sched/demand.h"
#include "sched/placer.h"
#include "sched/queue_order.h"
#include "sched/reasons.h"
#include "sched/reservation.h"

namespace gantry {

const char* ToString(WaitCode c) {
  switch (c) {
    case WaitCode::kNoCapacity: return "no_capacity";
    case WaitCode::kBehindReservation: return "behind_reservation";
    case WaitCode::kStrictOrder: return "strict_order";
    case WaitCode::kNeverFits: return "never_fits";
    case WaitCode::kNoSchedulableNode: return "no_schedulable_node";
    case WaitCode::kNotExamined: return "not_examined";
  }
  return "?";
}

namespace {

// What this cycle learned about one job shape.
struct ShapeMemo {
  bool fails_now = false;  // no room even ignoring reservations
  bool diagnosed = false;
  Diagnosis diagnosis;
};

std::string NodeList(const Snapshot& snap, const Placement& p) {
  std::string out;
  for (size_t i = 0; i < p.nodes.size() && i < 3; ++i) out += (i ? ", " : "") + snap.nodes[p.nodes[i].node].id;
  if (p.nodes.size() > 3) out += fmt::format(" and {} more", p.nodes.size() - 3);
  return out;
}

std::vector<MigPlacement> LayoutAfter(const ClusterState& state, const MigChange& c) {
  std::vector<MigPlacement> layout;
  for (const MigSlot& m : state.gpu(c.node, c.gpu).mig) {
    if (std::find(c.destroy.begin(), c.destroy.end(), m.placement) == c.destroy.end()) layout.push_back(m.placement);
  }
  layout.insert(layout.end(), c.create.begin(), c.create.end());
  return layout;
}

}  // namespace

Plan Engine::Schedule(const Snapshot& snap) const {
  ClusterState state(snap, catalog_);
  Placer placer(state, config_);
  const TimeMs now = snap.now_ms;
  int largest_node = 0;
  for (int g : state.max_gpus_per_type()) largest_node = std::max(largest_node, g);
  std::vector<QueueEntry> order = OrderQueue(snap.pending, config_, now, largest_node);

  Plan plan;
  std::unordered_map<std::string, ShapeMemo> shapes;
  // Shape + number of reservations a job must respect -> it failed; reset per reservation.
  std::unordered_map<std::string, WaitCode> fails_respecting;
  std::vector<TimeMs> reservation_times;  // sorted
  std::string first_blocked;
  int examined = 0;

  for (const QueueEntry& e : order) {
    const PendingJob& job = snap.pending[e.pending_index];
    auto wait = [&](WaitCode code, std::string reason, TimeMs estimate = kNever) {
      plan.waiting.push_back({e.pending_index, job.spec.id, 0, code, std::move(reason), estimate});
    };
    if (e.class_rank == INT32_MIN) {
      wait(WaitCode::kNeverFits, "unknown priority class '" + job.spec.priority_class + "'");
      continue;
    }
    if (config_.backfill_depth > 0 && examined >= config_.backfill_depth) {
      wait(WaitCode::kNotExamined, fmt::format("not examined this cycle (backfill depth {})", config_.backfill_depth));
      continue;
    }
    ++examined;
    if (!first_blocked.empty() && !config_.backfill_enabled) {
      wait(WaitCode::kStrictOrder, "waits behind higher-ranked job " + first_blocked + " (strict order, backfill off)");
      continue;
    }

    Demand d = CompileDemand(job.spec, catalog_, state.max_gpus_per_type());
    std::string key = ShapeKey(d);
    ShapeMemo& memo = shapes[key];
    const TimeMs end = ExpectedEnd(job.spec, now, now);
    const int respected = static_cast<int>(std::lower_bound(reservation_times.begin(), reservation_times.end(), end) -
                                           reservation_times.begin());
    std::string rkey = key + fmt::format("#{}", respected);

    std::optional<PlacementChoice> choice;
    WaitCode code = WaitCode::kNoCapacity;
    if (!memo.fails_now) {
      auto known = fails_respecting.find(rkey);
      if (respected == 0) {
        choice = placer.Find(d, end);
        memo.fails_now = !choice;
      } else if (known != fails_respecting.end()) {
        code = known->second;
      } else {
        choice = placer.Find(d, end);
        if (!choice) {
          // Would it fit if it ignored the reservations?
          memo.fails_now = !placer.Find(d, now);
          code = memo.fails_now ? WaitCode::kNoCapacity : WaitCode::kBehindReservation;
          fails_respecting[rkey] = code;
        }
      }
    }

    if (choice) {
      for (const MigChange& c : choice->mig_changes) {
        state.SetMigLayout(c.node, c.gpu, LayoutAfter(state, c));
        plan.mig_changes.push_back(c);
      }
      state.Apply(choice->placement, d.mode, end);
      plan.starts.push_back({e.pending_index, job.spec.id, std::move(choice->placement), !first_blocked.empty()});
      continue;
    }

    std::string reason;
    if (code == WaitCode::kBehindReservation) {
      reason = fmt::format("{} free now, but it would still run at {} when GPUs are reserved for a higher-ranked job",
                           DescribeRequest(job.spec), FormatUtc(reservation_times.front()));
    } else {
      if (!memo.diagnosed) {
        memo.diagnosis = Diagnose(state, d);
        memo.diagnosed = true;
      }
      code = memo.diagnosis.code;
      reason = memo.diagnosis.text;
      if (code == WaitCode::kNeverFits || code == WaitCode::kNoSchedulableNode) {
        wait(code, reason);  // cannot start whatever runs: holds nothing back
        continue;
      }
    }
    TimeMs estimate = kNever;
    if (static_cast<int>(plan.reservations.size()) < config_.backfill_reservations) {
      if (auto start = FindEarliestStart(state, d)) {
        state.Reserve(start->placement, start->at_ms);
        reason += fmt::format("; reserved for {} on {}", FormatUtc(start->at_ms), NodeList(snap, start->placement));
        estimate = start->at_ms;
        reservation_times.insert(std::upper_bound(reservation_times.begin(), reservation_times.end(), start->at_ms),
                                 start->at_ms);
        fails_respecting.clear();
        plan.reservations.push_back({job.spec.id, start->at_ms, std::move(start->placement)});
      }
    }
    if (first_blocked.empty()) first_blocked = job.spec.id;
    wait(code, std::move(reason), estimate);
  }
  for (size_t i = 0; i < plan.waiting.size(); ++i) plan.waiting[i].position = static_cast<int>(i) + 1;
  return plan;
}

Status CheckAdmissible(const JobSpec& spec, const std::vector<Node>& nodes, const GpuCatalog& catalog) {
  const GpuRequest& r = spec.request;
  uint64_t mask = AllowedTypeMask(r, catalog);
  int allowed_nodes = 0;
  int mig_nodes = 0;
  for (const Node& n : nodes) {
    if (n.gpus.empty() || !(mask >> n.gpu_type() & 1)) continue;
    ++allowed_nodes;
    for (const Gpu& g : n.gpus) {
      if (g.mig_enabled) {
        ++mig_nodes;
        break;
      }
    }
  }
  if (allowed_nodes == 0) {
    return Status::Invalid(r.gpu_types.empty() ? "gpus" : "gpu_types",
                           "no node in the cluster has an allowed GPU type");
  }
  if (r.sharing == SharingMode::kMig && mig_nodes == 0) {
    return Status::Invalid("mig_profile", "no node of an allowed type has GPUs in MIG mode");
  }
  if (r.sharing != SharingMode::kExclusive) return Status::Ok();
  // A gang runs on one GPU type: some type must have enough nodes and GPUs for it.
  std::map<GpuTypeId, std::vector<int>> sizes;  // type -> GPUs per node
  for (const Node& n : nodes) {
    if (!n.gpus.empty() && (mask >> n.gpu_type() & 1)) sizes[n.gpu_type()].push_back(static_cast<int>(n.gpus.size()));
  }
  std::string best;
  for (const auto& [type, per_node] : sizes) {
    int total = 0;
    for (int s : per_node) total += s;
    best += fmt::format("{}{}: {} nodes, {} GPUs", best.empty() ? "" : "; ", catalog.Get(type).name, per_node.size(),
                        total);
    for (int count = r.num_nodes > 0 ? r.num_nodes : 1; count <= r.gpus; ++count) {
      if (r.gpus % count != 0) continue;
      int hosts = 0;
      for (int s : per_node) hosts += s >= r.gpus / count ? 1 : 0;
      if (hosts >= count) return Status::Ok();
      if (r.num_nodes > 0) break;
    }
  }
  if (r.num_nodes > 0) {
    return Status::Invalid("nodes", fmt::format("no GPU type has {} nodes with {} GPUs each ({})", r.num_nodes,
                                                r.gpus / r.num_nodes, best));
  }
  return Status::Invalid("gpus", fmt::format("{} GPUs fit on no GPU type of the cluster ({})", r.gpus, best));
  return Status::Ok();
}

}  // namespace gantry
