// Queue ordering by class, LAS tier, weighted score, submit time and id.
#include "sched/queue_order.h"

#include <algorithm>

namespace gantry {

namespace {

// The per-team terms of a job's score, looked up once per team change: a queue has few
// teams, and a long queue's reorder would otherwise spend its time in map lookups.
struct TeamTerms {
  const std::string* team = nullptr;
  double fair = 0, below = 0;
};

const TeamTerms& TermsOf(const std::string& team, const QueueContext& ctx, TeamTerms& last) {
  if (last.team && *last.team == team) return last;
  last.team = &team;
  last.fair = 0;
  if (ctx.fair_share && ctx.config.fairshare_weight != 0) {
    auto it = ctx.fair_share->find(team);
    last.fair = it == ctx.fair_share->end() ? 1.0 : it->second;
  }
  last.below = 0;
  if (ctx.guarantee_level && ctx.config.guarantee_weight != 0) {
    auto it = ctx.guarantee_level->find(team);
    last.below = it == ctx.guarantee_level->end() ? 0 : it->second;
  }
  return last;
}

double Score(const PendingJob& job, const QueueContext& ctx, TeamTerms& last) {
  const SchedulerConfig& config = ctx.config;
  double age =
      std::clamp(static_cast<double>(ctx.now_ms - job.submit_ms) / static_cast<double>(config.age_max_ms), 0.0, 1.0);
  double size = 0;
  if (ctx.largest_node_gpus > 0) {
    const GpuRequest& r = job.spec->request;
    double gpus = r.sharing == SharingMode::kExclusive ? r.gpus : r.gpu_milli / 1000.0;
    size = std::min(1.0, gpus / ctx.largest_node_gpus);
  }
  double short_job = 0;
  if (config.short_job_weight != 0) {
    const JobSpec& s = *job.spec;
    DurationMs d = s.predicted_duration_ms > 0   ? s.predicted_duration_ms
                   : s.estimated_duration_ms > 0 ? s.estimated_duration_ms
                                                 : s.time_limit_ms;
    double gpus = s.request.sharing == SharingMode::kExclusive ? s.request.gpus : s.request.gpu_milli / 1000.0;
    double gpu_hours = gpus * static_cast<double>(d) / static_cast<double>(kHourMs);
    short_job = config.short_job_ref_gpu_hours / (config.short_job_ref_gpu_hours + gpu_hours);
  }
  const TeamTerms& team = TermsOf(job.spec->team, ctx, last);
  return config.age_weight * age + config.size_weight * size + config.fairshare_weight * team.fair +
         config.short_job_weight * short_job + config.guarantee_weight * team.below;
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
