// Engine::Schedule: the scheduling cycle.
#include "sched/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "sched/cluster_state.h"
#include "sched/demand.h"
#include "sched/fair_share.h"
#include "sched/placer.h"
#include "sched/preemption.h"
#include "sched/preemption_rules.h"
#include "sched/queue_order.h"
#include "sched/reasons.h"
#include "sched/reservation.h"
#include "sched/scarcity.h"
#include "sched/shape_entry.h"
#include "sched/usage.h"

namespace gantry {

namespace {

using sched_internal::ShapeEntry;

// The most shapes of a starving team's waiting jobs a cycle tries to rescue (one each).
constexpr size_t kRescueShapes = 4;

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

class Cycle {
 public:
  Cycle(const Snapshot& snap, const GpuCatalog& catalog, const SchedulerConfig& config, const QuotaConfig& quotas,
        ScheduleOptions options)
      : snap_(snap),
        catalog_(catalog),
        config_(config),
        quotas_(quotas),
        options_(options),
        state_(snap, catalog),
        placer_(state_, config),
        usage_(snap, catalog, quotas),
        evicting_(snap.running.size(), 0) {
    if (config.ReadsFairShare()) fair_share_ = FairShareFactors(snap.team_usage, quotas);
    for (const PriorityClass& c : config.priority_classes) {
      if (!c.preemptible) unpreemptible_classes_.push_back(c.name);
    }
    guarantee_levels_ = usage_.GuaranteeLevels(snap.below_guarantee_since, snap.now_ms, config.reclaim_after_ms);
  }

  Plan Run();

 private:
  uint32_t AddReason(std::string text) {
    if (!options_.explain) return 0;  // nobody reads reasons then
    plan_.reasons.push_back(std::move(text));
    return static_cast<uint32_t>(plan_.reasons.size() - 1);
  }
  // The job's id is filled in by Finish(), in queue order (the specs stay untouched here).
  void Wait(const QueueEntry& e, WaitCode code, uint32_t reason, TimeMs estimate = kNever) {
    plan_.waiting.push_back({e.pending_index, std::string(), 0, code, reason, estimate});
  }
  ShapeEntry& Shape(const JobSpec& spec);
  // A pending job's shape and expected end, worked out while the queue is ordered (in
  // stored order): the walk in rank order then touches no job spec for most jobs (each
  // lives apart on the heap, and a random walk over 100k of them waits on memory).
  void Learn(size_t pending_index);
  void Consider(const QueueEntry& e);
  // Evicts running jobs to make room for a blocked job, if the rules allow; true if so.
  bool TryPreempt(const QueueEntry& e, const JobSpec& spec, const ShapeEntry& shape);
  // Once per cycle, before the first victim search: each running job's class rank and
  // protections (victim_rank_) and whether it stops soon anyway (stops_anyway_).
  void RankVictims();
  // Preemption is on and this cycle has searches left: at most max_preemptors_per_cycle
  // evictions for that many jobs, and twice that many victim searches.
  bool MayTryPreempt() const {
    return config_.preemption_enabled && preemptors_ < config_.max_preemptors_per_cycle &&
           searches_ < 2 * config_.max_preemptors_per_cycle;
  }
  QueueContext Context(int largest_node) const {
    return {config_, snap_.now_ms, largest_node, config_.ReadsFairShare() ? &fair_share_ : nullptr, &guarantee_levels_};
  }
  // Each team starving past the bound, longest starving first: the waiting jobs to try to
  // rescue, smallest first (the oldest among equals), one per shape, at most kRescueShapes.
  std::vector<std::vector<size_t>> RescueCandidates();
  // Tries each starving team's candidates in turn until one starts or evicts for itself, so
  // a GPU type whose GPUs no rule may take does not starve the team's other work; each one
  // tried is marked rescued, the first with the rescue's unconditional reservation.
  template <typename EntryOf>
  void ConsiderRescues(EntryOf entry_of);
  // Built on the first explained wait that names GPU types: what each type is asked for.
  TypeScarcity& Scarcity();
  // For a waiting job of `shape`, which names GPU types: the shape's diagnosis, with a note
  // when those types are scarcer than their demand (worked out once per shape), or, when
  // the job has a reason of its own (`reason` not empty), the note added to that. Apart
  // from Consider, so that its string work stays off the walk's path.
  [[gnu::noinline]] int NoteScarcity(ShapeEntry& shape, std::string& reason);
  bool Rescued(size_t pending_index) const { return !rescued_.empty() && rescued_[pending_index]; }
  bool FirstRescue(size_t pending_index) const { return !rescued_.empty() && rescued_[pending_index] == 1; }
  // Without explanations: true once no later job can start this cycle.
  bool Done() const;
  // Numbers the waiting jobs (or drops the list when not explaining).
  void Finish();

  const Snapshot& snap_;
  const GpuCatalog& catalog_;
  const SchedulerConfig& config_;
  const QuotaConfig& quotas_;
  const ScheduleOptions options_;
  ClusterState state_;
  Placer placer_;
  UsageTracker usage_;
  std::map<std::string, double> fair_share_;
  std::map<std::string, int> guarantee_levels_;
  std::optional<VictimFinder> finder_;     // built on the first preemption attempt
  std::optional<TypeScarcity> scarcity_;   // built on the first explained wait that names types
  std::vector<char> evicting_;             // running jobs this plan evicts
  std::vector<int> victim_rank_;           // per running job: class rank, INT32_MAX if protected
  std::vector<char> stops_anyway_;         // per running job: stopping, or expected to end within a grace period
  std::vector<char> eligible_, stopping_;  // victim search buffers (per running job)
  std::unordered_set<std::string> preempt_failed_;
  // The starvation guard: per pending job, 1 when it is its starving team's first rescued
  // job (considered first, always given a reservation, may evict other teams' work), 2 for
  // another of its shapes tried after the first could neither start nor evict.
  std::vector<char> rescued_;
  int normal_reservations_ = 0;  // reservations under the backfill_reservations limit
  int lowest_victim_rank_ = INT32_MAX;
  int preemptors_ = 0;
  int searches_ = 0;  // victim searches this cycle (successful or not)
  Plan plan_;
  std::unordered_map<std::string, ShapeEntry> shapes_;
  std::string key_;  // reused buffer for shape keys
  // Per pending job, when Learn() ran for all: side by side, so the walk reads one line.
  struct Learned {
    const JobSpec* spec = nullptr;
    ShapeEntry* shape = nullptr;
    TimeMs end = 0;  // its expected end if started now
  };
  std::vector<Learned> learned_;
  std::vector<std::string> unpreemptible_classes_;  // their jobs never go to spot nodes
  std::vector<TimeMs> reservation_times_;           // sorted
  std::string first_blocked_;
  uint32_t strict_reason_ = 0;
  uint32_t depth_reason_ = 0;
  int examined_ = 0;
};

ShapeEntry& Cycle::Shape(const JobSpec& spec) {
  // Spot nodes take preemptible work of preemptible classes only (sites rarely have a
  // class that is not: the usual answer is the job's own flag).
  bool spot_ok = spec.preemptible;
  for (const std::string& c : unpreemptible_classes_) spot_ok = spot_ok && c != spec.priority_class;
  key_.clear();
  AppendShapeKey(spec, spot_ok, key_);
  auto it = shapes_.find(key_);
  if (it == shapes_.end()) {
    ShapeEntry entry;
    entry.demand = CompileDemand(spec, catalog_, state_.max_gpus_per_type());
    entry.demand.spot_ok = spot_ok;
    entry.share = JobGpuShare(spec.request, catalog_);
    entry.names_types = !spec.request.gpu_types.empty();
    it = shapes_.emplace(key_, std::move(entry)).first;
    it->second.key = &it->first;
  }
  return it->second;
}

void Cycle::Learn(size_t pending_index) {
  const JobSpec& spec = *snap_.pending[pending_index].spec;
  ShapeEntry& shape = Shape(spec);
  shape.waiting_gpus += shape.share;
  learned_[pending_index] = {&spec, &shape, ExpectedEnd(spec, snap_.now_ms, snap_.now_ms)};
}

void Cycle::Consider(const QueueEntry& e) {
  const Learned* learned = learned_.empty() ? nullptr : &learned_[e.pending_index];
  const JobSpec& spec = learned ? *learned->spec : *snap_.pending[e.pending_index].spec;
  const TimeMs now = snap_.now_ms;
  if (e.class_rank == INT32_MIN) {
    Wait(e, WaitCode::kNeverFits, AddReason("unknown priority class '" + spec.priority_class + "'"));
    return;
  }
  if (config_.backfill_depth > 0 && examined_ >= config_.backfill_depth) {
    if (examined_++ == config_.backfill_depth) {
      depth_reason_ = AddReason(fmt::format("not examined this cycle (backfill depth {})", config_.backfill_depth));
    }
    Wait(e, WaitCode::kNotExamined, depth_reason_);
    return;
  }
  ++examined_;
  if (!first_blocked_.empty() && !config_.backfill_enabled) {
    Wait(e, WaitCode::kStrictOrder, strict_reason_);
    return;
  }

  if (!snap_.holds.empty()) {
    auto held = snap_.holds.find(spec.team);
    if (held == snap_.holds.end()) held = snap_.holds.find(spec.team + "/" + spec.project);
    if (held != snap_.holds.end()) {
      Wait(e, WaitCode::kHeld, AddReason(held->second));
      return;
    }
  }

  ShapeEntry& shape = learned ? *learned->shape : Shape(spec);
  shape.demand.spec = &spec;  // the shape's own fields are equal; preferences are the job's
  const Demand& d = shape.demand;
  const double share = shape.share;
  if (std::string why = usage_.QuotaBlock(spec, share); !why.empty()) {
    Wait(e, WaitCode::kQuota, AddReason(std::move(why)));  // limits, not capacity: holds nothing back
    return;
  }

  const TimeMs end = learned ? learned->end : ExpectedEnd(spec, now, now);
  const size_t respected = static_cast<size_t>(
      std::lower_bound(reservation_times_.begin(), reservation_times_.end(), end) - reservation_times_.begin());
  if (shape.generation != reservation_times_.size()) {
    shape.generation = reservation_times_.size();
    shape.respecting.assign(reservation_times_.size() + 1, 0);
  }

  std::optional<PlacementChoice> choice;
  WaitCode code = WaitCode::kNoCapacity;
  if (!shape.fails_now) {
    int8_t known = shape.respecting[respected];
    if (respected == 0) {
      choice = placer_.Find(d, end);
      shape.fails_now = !choice;
    } else if (known != 0) {
      code = known == 2 ? WaitCode::kBehindReservation : WaitCode::kNoCapacity;
    } else {
      choice = placer_.Find(d, end);
      if (!choice) {
        shape.fails_now = !placer_.Find(d, now);  // would it fit ignoring the reservations?
        code = shape.fails_now ? WaitCode::kNoCapacity : WaitCode::kBehindReservation;
        shape.respecting[respected] = shape.fails_now ? 1 : 2;
      }
    }
  }

  if (choice) {
    for (const MigChange& c : choice->mig_changes) {
      state_.SetMigLayout(c.node, c.gpu, LayoutAfter(state_, c));
      plan_.mig_changes.push_back(c);
    }
    state_.Apply(choice->placement, choice->placement.sharing, end);
    usage_.Add(spec, snap_.nodes[choice->placement.nodes[0].node].gpu_type(), share);
    plan_.starts.push_back({e.pending_index, spec.id, std::move(choice->placement), !first_blocked_.empty()});
    return;
  }

  const bool explain = options_.explain;
  std::string reason;
  if (code == WaitCode::kBehindReservation) {
    // It may still evict elsewhere (never on reserved GPUs).
    if (MayTryPreempt() && TryPreempt(e, spec, shape)) {
      return;
    }
    if (explain) {
      reason = fmt::format("{} free now, but it would still run at {} when GPUs are reserved for a higher-ranked job",
                           DescribeRequest(spec), FormatUtc(reservation_times_.front()));
    }
  } else {
    if (shape.reason_id < 0) {
      Diagnosis diag = Diagnose(state_, d, explain);
      shape.code = diag.code;
      shape.reason_id = static_cast<int>(AddReason(std::move(diag.text)));
    }
    code = shape.code;
    if (code == WaitCode::kNeverFits || code == WaitCode::kNoSchedulableNode) {
      Wait(e, code, shape.reason_id);  // cannot start whatever runs: holds nothing back
      return;
    }
    if (MayTryPreempt() && TryPreempt(e, spec, shape)) {
      return;
    }
  }
  int base_reason = shape.reason_id;
  if (explain && shape.names_types && shape.scarce != 0) {
    const bool known = reason.empty() && shape.scarce_reason_id >= 0;
    base_reason = known ? shape.scarce_reason_id : NoteScarcity(shape, reason);
  }
  TimeMs estimate = kNever;
  const bool rescue = Rescued(e.pending_index), first_rescue = FirstRescue(e.pending_index);
  // Another shape tried for a starving team gets no reservation: the first one has it.
  if (first_rescue || (!rescue && normal_reservations_ < config_.backfill_reservations)) {
    if (auto start = FindEarliestStart(state_, d)) {
      if (!first_rescue) ++normal_reservations_;
      state_.Reserve(start->placement, start->at_ms);
      if (explain) {
        if (reason.empty()) reason = plan_.reasons[base_reason];
        reason += fmt::format("; reserved for {} on {}", FormatUtc(start->at_ms), NodeList(snap_, start->placement));
      }
      estimate = start->at_ms;
      reservation_times_.insert(std::upper_bound(reservation_times_.begin(), reservation_times_.end(), start->at_ms),
                                start->at_ms);
      plan_.reservations.push_back({spec.id, start->at_ms, std::move(start->placement)});
    }
  }
  if (rescue && explain) {
    if (reason.empty() && base_reason >= 0) reason = plan_.reasons[base_reason];
    reason += fmt::format("; first in line: team {} has had jobs waiting and no GPU for {} (starvation bound {})",
                          spec.team, FormatDuration(now - snap_.starving_since.at(spec.team)),
                          FormatDuration(config_.starvation_bound_ms));
  }
  uint32_t reason_id = reason.empty() ? static_cast<uint32_t>(base_reason) : AddReason(std::move(reason));
  if (first_blocked_.empty()) {
    first_blocked_ = spec.id;
    strict_reason_ = AddReason("waits behind higher-ranked job " + spec.id + " (strict order, backfill off)");
  }
  Wait(e, code, reason_id, estimate);
}

int Cycle::NoteScarcity(ShapeEntry& shape, std::string& reason) {
  if (shape.scarce < 0) {
    shape.scarce_note = Scarcity().Note(shape.demand.type_mask);
    shape.scarce = !shape.scarce_note.empty();
  }
  if (!shape.scarce) return shape.reason_id;
  if (!reason.empty()) {
    reason += "; " + shape.scarce_note;
  } else if (shape.reason_id >= 0 && shape.scarce_reason_id < 0) {
    shape.scarce_reason_id = static_cast<int>(AddReason(plan_.reasons[shape.reason_id] + "; " + shape.scarce_note));
  }
  return shape.scarce_reason_id >= 0 ? shape.scarce_reason_id : shape.reason_id;
}

TypeScarcity& Cycle::Scarcity() {
  if (!scarcity_) {
    scarcity_.emplace(catalog_, state_.schedulable_gpus_per_type(), usage_.RunningByType());
    if (!learned_.empty()) {  // every pending job's shape is known: add them up by shape
      for (const auto& [key, shape] : shapes_) scarcity_->AddWaiting(shape.demand.type_mask, shape.waiting_gpus);
    } else {
      for (const PendingJob& p : snap_.pending) {
        if (!p.spec) continue;  // an empty slot (ScheduleOptions::pending_in_order)
        const ShapeEntry& shape = Shape(*p.spec);
        scarcity_->AddWaiting(shape.demand.type_mask, shape.share);
      }
    }
  }
  return *scarcity_;
}

void Cycle::RankVictims() {
  const TimeMs now = snap_.now_ms;
  victim_rank_.assign(snap_.running.size(), INT32_MAX);  // INT32_MAX: protected
  stops_anyway_.assign(snap_.running.size(), 0);
  lowest_victim_rank_ = INT32_MAX;
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    const RunningJob& r = snap_.running[i];
    // Stopping already, or ending within a grace period anyway: its GPUs come free
    // without an eviction.
    stops_anyway_[i] = r.stop_at_ms != kNever || ExpectedEnd(r, now) <= now + config_.grace_period_ms;
    if (r.stop_at_ms != kNever || !r.spec->preemptible || now - r.start_ms < config_.min_runtime_ms ||
        r.evictions >= config_.max_evictions) {
      continue;
    }
    int c = config_.FindClass(r.spec->priority_class);
    if (c >= 0 && !config_.priority_classes[c].preemptible) continue;  // e.g. critical
    victim_rank_[i] = c < 0 ? INT32_MIN : config_.priority_classes[c].rank;
    lowest_victim_rank_ = std::min(lowest_victim_rank_, victim_rank_[i]);
  }
}

bool Cycle::TryPreempt(const QueueEntry& e, const JobSpec& spec, const ShapeEntry& shape) {
  const TimeMs now = snap_.now_ms;
  const Demand& d = shape.demand;
  const int my_class = config_.FindClass(spec.priority_class);
  Preemptor p;
  p.spec = &spec;
  p.demand = &d;
  p.share = shape.share;
  p.class_rank = my_class >= 0 ? config_.priority_classes[my_class].rank : INT32_MIN;
  p.class_preempts = my_class >= 0 && config_.priority_classes[my_class].preempts_others;
  p.las_tier = LasTier(snap_.pending[e.pending_index].attained_gpu_ms, config_);
  p.rescue = Rescued(e.pending_index);
  if (auto since = snap_.below_guarantee_since.find(spec.team); since != snap_.below_guarantee_since.end()) {
    p.below_guarantee_since = since->second;
  }
  RuleContext ctx(config_, quotas_, usage_, now);
  if (config_.ReadsFairShare()) ctx.fair_share = &fair_share_;
  const std::span<const PreemptionRule> rules = PreemptionRules();
  // The rules open to this job, as bits by table index: first tier, and last resorts.
  uint32_t open = 0, last_resorts = 0;
  for (size_t k = 0; k < rules.size(); ++k) {
    if (rules[k].opens(p, ctx)) (rules[k].last_resort ? last_resorts : open) |= 1u << k;
  }
  if (!open && !last_resorts) return false;

  // Once per cycle: each running job's class rank, and whether the protections let it go
  // at all (preemptible, its class preemptible, ran min_runtime, evicted < max_evictions).
  if (victim_rank_.empty() && !snap_.running.empty()) RankVictims();
  for (size_t k = 0; k < rules.size(); ++k) {
    if ((open >> k & 1) && rules[k].may_have_victims && !rules[k].may_have_victims(p, lowest_victim_rank_)) {
      open &= ~(1u << k);
    }
  }
  if (!open && !last_resorts) return false;
  // A search that failed for this shape, team, class and tier fails again this cycle (the
  // victims only get fewer, and natural starts only get later).
  std::string failed_key = *shape.key + '\2' + spec.team + '\2' + spec.priority_class + '\2' +
                           std::to_string(p.las_tier) + (p.rescue ? "\2r" : "");
  if (preempt_failed_.count(failed_key)) return false;
  bool patient = open != 0;
  for (size_t k = 0; k < rules.size() && patient; ++k) {
    if (open >> k & 1) patient = rules[k].patient && rules[k].patient(p, ctx);
  }
  if (patient) {
    // Every open rule would rather wait: if GPUs come free by themselves soon, waiting
    // loses no work.
    ++searches_;
    auto natural = FindEarliestStart(state_, d);
    if (natural && natural->at_ms <= now + config_.reclaim_patience_ms) {
      preempt_failed_.insert(std::move(failed_key));
      return false;
    }
  }

  ++searches_;
  // Who may go, and under which rule (eligible[i]: 1 + the rule's index, 0: may not go).
  // Only the per-cycle arrays are read for most running jobs: a search walks them all.
  std::vector<char>& eligible = eligible_;
  std::vector<char>& stopping = stopping_;
  eligible.assign(snap_.running.size(), 0);
  stopping.resize(snap_.running.size());
  auto mark = [&](size_t i, uint32_t which) {
    const VictimCandidate v{&snap_.running[i], victim_rank_[i]};
    for (size_t k = 0; k < rules.size(); ++k) {
      if ((which >> k & 1) && rules[k].allows(p, v, ctx)) {
        eligible[i] = static_cast<char>(k + 1);
        return;
      }
    }
  };
  bool any = false;
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    stopping[i] = stops_anyway_[i] || evicting_[i];
    if (stopping[i] || victim_rank_[i] == INT32_MAX) continue;
    mark(i, open);
    any = any || eligible[i];
  }
  if (!any && !last_resorts) {
    preempt_failed_.insert(std::move(failed_key));
    return false;
  }
  if (!finder_) finder_.emplace(state_, snap_);
  // Victims under a rule with a room may take from each team at most room(team) GPUs
  // together; a team whose victims would take more is left out under that rule and the
  // search runs again. Only the rules of the tier searched are held to their rooms.
  std::optional<VictimChoice> choice;
  auto search = [&](bool last_resort) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      choice = finder_->Find(d, eligible, stopping);
      if (!choice || choice->victims.empty()) return;
      std::unordered_map<std::string, double> taken;  // rule index + team -> GPUs
      std::string over;
      char over_rule = 0;
      for (size_t v : choice->victims) {
        const PreemptionRule& rule = rules[eligible[v] - 1];
        if (rule.last_resort != last_resort || !rule.room) continue;
        const RunningJob& r = snap_.running[v];
        double& sum = taken[eligible[v] + r.spec->team];
        sum += PlacementShare(r.placement, r.spec->request.sharing);
        if (sum > rule.room(r.spec->team, ctx) + 1e-9) {
          over = r.spec->team;
          over_rule = eligible[v];
        }
      }
      if (over.empty()) return;
      for (size_t i = 0; i < snap_.running.size(); ++i) {
        if (eligible[i] == over_rule && snap_.running[i].spec->team == over) eligible[i] = 0;
      }
      choice.reset();
    }
  };
  search(false);
  for (size_t k = 0; k < rules.size() && choice; ++k) {
    if (!(open >> k & 1) || !rules[k].most_victims) continue;
    auto count = std::count_if(choice->victims.begin(), choice->victims.end(),
                               [&](size_t v) { return eligible[v] == static_cast<char>(k + 1); });
    if (static_cast<double>(count) > rules[k].most_victims(p, ctx) + 1e-9) choice.reset();
  }
  if ((!choice || choice->victims.empty()) && last_resorts) {
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      if (eligible[i] || stopping[i] || victim_rank_[i] == INT32_MAX) continue;
      mark(i, last_resorts);
    }
    search(true);
  }
  if (!choice || choice->victims.empty()) {  // nothing to evict: wait as usual
    preempt_failed_.insert(std::move(failed_key));
    return false;
  }
  const TimeMs stop_at = now + config_.grace_period_ms;
  std::string names;
  for (size_t v : choice->victims) {
    evicting_[v] = 1;
    const std::string& id = snap_.running[v].spec->id;
    plan_.preemptions.push_back({v, id, spec.id, stop_at, rules[eligible[v] - 1].name});
    if (options_.explain) names += (names.empty() ? "" : ", ") + id;
  }
  state_.Reserve(choice->hold, stop_at);
  usage_.Add(spec, snap_.nodes[choice->hold.nodes[0].node].gpu_type(), p.share);
  ++preemptors_;
  uint32_t reason = 0;
  if (options_.explain) {
    reason = AddReason(fmt::format(
        "{}; evicting {} ({:.0f} GPU-seconds of work lost); starts after their {} grace period", DescribeRequest(spec),
        names, choice->lost_gpu_ms / 1000.0, FormatDuration(config_.grace_period_ms)));
  }
  if (first_blocked_.empty()) {
    first_blocked_ = spec.id;
    strict_reason_ = AddReason("waits behind higher-ranked job " + spec.id + " (strict order, backfill off)");
  }
  Wait(e, WaitCode::kPreempting, reason, stop_at);
  return true;
}

Plan Cycle::Run() {
  int largest_node = 0;
  for (int g : state_.max_gpus_per_type()) largest_node = std::max(largest_node, g);
  std::vector<QueueEntry> order;
  if (options_.pending_in_order) {
    // The caller's order stands; a job needs only its class here (an unknown class waits).
    // Class names repeat: remember the last lookup.
    const std::string* last_class = nullptr;
    int last_rank = 0;
    auto entry = [&](size_t i) {
      const PendingJob& job = snap_.pending[i];
      if (!last_class || *last_class != job.spec->priority_class) {
        int c = config_.FindClass(job.spec->priority_class);
        last_rank = c < 0 ? INT32_MIN : config_.class_tiers ? config_.priority_classes[c].rank : 0;
        last_class = &job.spec->priority_class;
      }
      QueueEntry e;
      e.pending_index = i;
      e.class_rank = last_rank;
      e.submit_ms = job.submit_ms;
      e.arrival = job.arrival;
      return e;
    };
    ConsiderRescues(entry);
    for (size_t i = 0; i < snap_.pending.size(); ++i) {
      if (!options_.explain && Done()) break;
      if (snap_.pending[i].spec && !Rescued(i)) Consider(entry(i));
    }
    Finish();
    return std::move(plan_);
  }
  // Explaining and examining every job (backfill on, no depth): learn all shapes at once.
  const bool examines_all =
      options_.explain && config_.backfill_enabled &&
      (config_.backfill_depth <= 0 || static_cast<size_t>(config_.backfill_depth) >= snap_.pending.size());
  if (examines_all) learned_.resize(snap_.pending.size());
  order = OrderQueue(snap_.pending, Context(largest_node), options_.explain,
                     examines_all ? std::function<void(size_t)>([this](size_t i) { Learn(i); }) : nullptr);
  // The rescued jobs go first, in their own order; the rest keep theirs.
  ConsiderRescues([&](size_t i) {
    return *std::find_if(order.begin(), order.end(), [&](const QueueEntry& q) { return q.pending_index == i; });
  });
  if (!rescued_.empty()) std::erase_if(order, [&](const QueueEntry& q) { return Rescued(q.pending_index); });
  if (options_.explain) {
    plan_.waiting.reserve(order.size());
    for (const QueueEntry& e : order) Consider(e);
    Finish();
    return std::move(plan_);
  }
  // Without explanations: pop in order from a heap, and stop once nothing more can start.
  auto after = [&](const QueueEntry& a, const QueueEntry& b) { return QueueBefore(b, a, snap_.pending); };
  std::make_heap(order.begin(), order.end(), after);
  for (auto end = order.end(); end != order.begin() && !Done(); --end) {
    std::pop_heap(order.begin(), end, after);
    Consider(*(end - 1));
  }
  Finish();
  return std::move(plan_);
}

std::vector<std::vector<size_t>> Cycle::RescueCandidates() {
  std::vector<std::vector<size_t>> out;
  if (config_.starvation_bound_ms <= 0 || snap_.starving_since.empty()) return out;
  struct Waiting {
    double gpus;
    TimeMs submit_ms;
    size_t index;
  };
  std::map<std::string, std::vector<Waiting>> by_team;  // starving team -> its waiting jobs
  for (size_t i = 0; i < snap_.pending.size(); ++i) {
    const PendingJob& p = snap_.pending[i];
    if (!p.spec) continue;  // an empty slot (ScheduleOptions::pending_in_order)
    auto since = snap_.starving_since.find(p.spec->team);
    if (since == snap_.starving_since.end() || snap_.now_ms - since->second < config_.starvation_bound_ms) continue;
    by_team[p.spec->team].push_back({JobGpuShare(p.spec->request, catalog_), p.submit_ms, i});
  }
  if (by_team.empty()) return out;
  rescued_.assign(snap_.pending.size(), 0);
  for (auto& [team, jobs] : by_team) {
    std::stable_sort(jobs.begin(), jobs.end(), [](const Waiting& a, const Waiting& b) {
      return a.gpus != b.gpus ? a.gpus < b.gpus : a.submit_ms < b.submit_ms;
    });
    std::vector<size_t> tried;
    std::vector<const ShapeEntry*> shapes;
    for (const Waiting& w : jobs) {
      const ShapeEntry* shape = &Shape(*snap_.pending[w.index].spec);
      if (std::find(shapes.begin(), shapes.end(), shape) != shapes.end()) continue;
      shapes.push_back(shape);
      tried.push_back(w.index);
      if (tried.size() == kRescueShapes) break;
    }
    out.push_back(std::move(tried));
  }
  std::sort(out.begin(), out.end(), [&](const std::vector<size_t>& a, const std::vector<size_t>& b) {
    const PendingJob &pa = snap_.pending[a.front()], &pb = snap_.pending[b.front()];
    TimeMs sa = snap_.starving_since.at(pa.spec->team), sb = snap_.starving_since.at(pb.spec->team);
    return sa != sb ? sa < sb : pa.submit_ms < pb.submit_ms;
  });
  return out;
}

template <typename EntryOf>
void Cycle::ConsiderRescues(EntryOf entry_of) {
  for (const std::vector<size_t>& candidates : RescueCandidates()) {
    for (size_t k = 0; k < candidates.size(); ++k) {
      const size_t i = candidates[k];
      rescued_[i] = k == 0 ? 1 : 2;
      const size_t starts = plan_.starts.size(), evictions = plan_.preemptions.size(), waits = plan_.waiting.size();
      Consider(entry_of(i));
      // Served: it starts, evicts, has evictions in flight, or GPUs come free for it within
      // a grace period anyway.
      const bool soon = plan_.waiting.size() > waits &&
                        plan_.waiting.back().estimated_start_ms <= snap_.now_ms + config_.grace_period_ms;
      if (plan_.starts.size() > starts || plan_.preemptions.size() > evictions || snap_.pending[i].nominated || soon) {
        break;
      }
    }
  }
}

bool Cycle::Done() const {
  bool reservations_done = normal_reservations_ >= config_.backfill_reservations;
  bool strict_blocked = !config_.backfill_enabled && !first_blocked_.empty();
  bool past_depth = config_.backfill_depth > 0 && examined_ >= config_.backfill_depth;
  return strict_blocked || past_depth || (state_.Exhausted() && reservations_done);
}

void Cycle::Finish() {
  if (!options_.explain) {
    plan_.waiting.clear();
    return;
  }
  // The ids, taken walking the pending jobs in their stored order (see LearnShapes).
  std::vector<int32_t> slot(snap_.pending.size(), -1);
  for (size_t i = 0; i < plan_.waiting.size(); ++i) {
    plan_.waiting[i].position = static_cast<int>(i) + 1;
    slot[plan_.waiting[i].pending_index] = static_cast<int32_t>(i);
  }
  for (size_t p = 0; p < snap_.pending.size(); ++p) {
    if (slot[p] >= 0) plan_.waiting[slot[p]].job_id = snap_.pending[p].spec->id;
  }
}

}  // namespace

Engine::Engine(const GpuCatalog& catalog, const SchedulerConfig& config, const QuotaConfig* quotas)
    : catalog_(catalog), config_(config), quotas_(quotas) {}

Plan Engine::Schedule(const Snapshot& snap, ScheduleOptions options) const {
  static const QuotaConfig kNoQuotas;
  return Cycle(snap, catalog_, config_, quotas_ ? *quotas_ : kNoQuotas, options).Run();
}

}  // namespace gantry
