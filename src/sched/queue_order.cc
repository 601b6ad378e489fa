// Queue ordering by class, LAS tier, the weighted score of the priority factors, submit
// time and id.
#include "sched/queue_order.h"

#include <algorithm>
#include <array>

#include "sched/fair_share.h"
#include "sched/priority_factors.h"

namespace gantry {

namespace {

const TeamTerms& TermsOf(const std::string& team, const QueueContext& ctx, TeamTerms& last) {
  if (last.team && *last.team == team) return last;
  last.team = &team;
  last.fair = 0;
  if (ctx.fair_share && ctx.config.ReadsFairShare()) {
    auto it = ctx.fair_share->find(team);
    last.fair = it == ctx.fair_share->end() ? 1.0 : it->second;
  }
  last.below = 0;
  if (ctx.guarantee_level && ctx.config.guarantee_weight != 0) {
    auto it = ctx.guarantee_level->find(team);
    last.below = it == ctx.guarantee_level->end() ? 0 : it->second;
    if (last.below != 0 && ctx.fair_share && !GuaranteeActs(last.fair, ctx.config)) last.below = 0;
  }
  return last;
}

// age: how long it has waited, up to age_max.
double AgeFactor(const PendingJob& job, const QueueContext& ctx, TeamTerms&) {
  return std::clamp(static_cast<double>(ctx.now_ms - job.submit_ms) / static_cast<double>(ctx.config.age_max_ms), 0.0,
                    1.0);
}

// size: its GPUs against the largest node's.
double SizeFactor(const PendingJob& job, const QueueContext& ctx, TeamTerms&) {
  if (ctx.largest_node_gpus <= 0) return 0;
  const GpuRequest& r = job.spec->request;
  double gpus = r.sharing == SharingMode::kExclusive ? r.gpus : r.gpu_milli / 1000.0;
  return std::min(1.0, gpus / ctx.largest_node_gpus);
}

// fairshare: its team's factor F (fair_share.h); a team with no entry counts as unused (1).
double FairShareFactor(const PendingJob& job, const QueueContext& ctx, TeamTerms& team) {
  return TermsOf(job.spec->team, ctx, team).fair;
}

// short_job: ref / (ref + its GPU-hours), from its prediction, else its estimate, else its
// time limit.
double ShortJobFactor(const PendingJob& job, const QueueContext& ctx, TeamTerms&) {
  const JobSpec& s = *job.spec;
  DurationMs d = s.predicted_duration_ms > 0   ? s.predicted_duration_ms
                 : s.estimated_duration_ms > 0 ? s.estimated_duration_ms
                                               : s.time_limit_ms;
  double gpus = s.request.sharing == SharingMode::kExclusive ? s.request.gpus : s.request.gpu_milli / 1000.0;
  double gpu_hours = gpus * static_cast<double>(d) / static_cast<double>(kHourMs);
  const double ref = ctx.config.short_job_ref_gpu_hours;
  return ref / (ref + gpu_hours);
}

// guarantee: 1 while its team holds less than its guarantee, 2 once that has lasted
// reclaim_after (the weight is large: such a team's work goes before borrowing work).
double GuaranteeFactor(const PendingJob& job, const QueueContext& ctx, TeamTerms& team) {
  return TermsOf(job.spec->team, ctx, team).below;
}

constexpr std::array<PriorityFactor, 5> kFactors = {{
    {"age", &SchedulerConfig::age_weight, AgeFactor, FactorMoves::kNever},
    {"size", &SchedulerConfig::size_weight, SizeFactor, FactorMoves::kOverTime},
    {"fairshare", &SchedulerConfig::fairshare_weight, FairShareFactor, FactorMoves::kOverTime},
    {"short_job", &SchedulerConfig::short_job_weight, ShortJobFactor, FactorMoves::kOverTime},
    {"guarantee", &SchedulerConfig::guarantee_weight, GuaranteeFactor, FactorMoves::kWithGuarantees},
}};

// The weighted sum, in table order; a factor whose weight is 0 is not computed.
double Score(const PendingJob& job, const QueueContext& ctx, TeamTerms& team) {
  double total = 0;
  for (const PriorityFactor& f : kFactors) {
    const double weight = ctx.config.*f.weight;
    if (weight != 0) total += weight * f.value(job, ctx, team);
  }
  return total;
}

// A class's rank, looked up again only when the class name changes from the last job's.
struct ClassRank {
  const std::string* name = nullptr;
  int rank = 0;
};

QueueEntry Entry(const std::vector<PendingJob>& pending, size_t index, const QueueContext& ctx, TeamTerms& team,
                 ClassRank& last) {
  const PendingJob& job = pending[index];
  if (!last.name || *last.name != job.spec->priority_class) {
    last.name = &job.spec->priority_class;
    int c = ctx.config.FindClass(job.spec->priority_class);
    last.rank = c < 0 ? INT32_MIN : ctx.config.class_tiers ? ctx.config.priority_classes[c].rank : 0;
  }
  QueueEntry e;
  e.pending_index = index;
  e.score = Score(job, ctx, team);
  e.submit_ms = job.submit_ms;
  e.arrival = job.arrival;
  e.class_rank = last.rank;
  e.tier = LasTier(job.attained_gpu_ms, ctx.config);
  e.nominated = job.nominated;
  return e;
}

}  // namespace

std::span<const PriorityFactor> PriorityFactors() { return kFactors; }

double QueueScore(const PendingJob& job, const QueueContext& ctx) {
  TeamTerms team;
  return Score(job, ctx, team);
}

int LasTier(double attained_gpu_ms, const SchedulerConfig& config) {
  double hours = attained_gpu_ms / static_cast<double>(kHourMs);
  int tier = 0;
  for (double threshold : config.las_thresholds_gpu_hours) tier += hours >= threshold ? 1 : 0;
  return tier;
}

QueueEntry MakeQueueEntry(const std::vector<PendingJob>& pending, size_t index, const QueueContext& ctx) {
  TeamTerms team;
  ClassRank rank;
  return Entry(pending, index, ctx, team, rank);
}

std::vector<QueueEntry> OrderQueue(const std::vector<PendingJob>& pending, const QueueContext& ctx, bool sorted,
                                   const std::function<void(size_t index)>& visit) {
  std::vector<QueueEntry> order;
  order.reserve(pending.size());
  TeamTerms team;
  ClassRank rank;
  for (size_t i = 0; i < pending.size(); ++i) {
    order.push_back(Entry(pending, i, ctx, team, rank));
    if (visit) visit(i);
  }
  if (sorted) {
    std::sort(order.begin(), order.end(),
              [&](const QueueEntry& a, const QueueEntry& b) { return QueueBefore(a, b, pending); });
  }
  return order;
}

}  // namespace gantry
