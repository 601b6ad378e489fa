// The discrete-event loop: arrivals, completions and preempted jobs' stops in time order,
// one engine cycle after each batch of events at the same instant; integrals of
// allocation and queue length; the fair-share ledger advanced through time.
#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "sched/usage.h"
#include "sim/policy.h"
#include "sim/simulation.h"

namespace gantry {

namespace sim_internal {

namespace {

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

int Simulation::TeamIndex(const std::string& team) {
  auto [it, added] = team_index_.emplace(team, static_cast<int>(teams_.size()));
  if (added) {
    teams_.push_back(team);
    team_alloc_.push_back(0);
    team_rate_.push_back(0);
    team_waiting_.push_back(0);
    starve_since_.push_back(-1);
    team_guarantee_.push_back(options_.quotas.Team(team).guaranteed_total());
    team_waiting_fit_.push_back(0);
    starve_fit_since_.push_back(-1);
    team_max_starve_fit_ms_.push_back(0);
    team_max_starve_ms_.push_back(0);
    team_shapes_.emplace_back(config_.catalog, max_gpus_per_type_);
    starve_allowed_since_.push_back(-1);
    team_max_starve_allowed_ms_.push_back(0);
    team_gpu_ms_.push_back(0);
  }
  return it->second;
}

void Simulation::Admit(size_t i) {
  const TraceJob& tj = trace_.jobs[i];
  JobState& js = jobs_[i];
  js.team = TeamIndex(tj.spec.team);
  JobSpec spec = tj.spec;
  spec.time_limit_ms = 0;  // the trace's limit is applied below, past the config's maximum
  Status s = ValidateJobSpec(spec, config_.catalog, config_.scheduler);
  if (s.ok()) s = CheckAdmissible(spec, admissible_nodes_, config_.catalog);
  if (s.ok()) s = CheckQuotaAdmissible(spec, options_.quotas, config_.catalog);
  if (!s.ok()) {
    js.rejected = true;
    ++rejected_;
    if (rejected_samples_.size() < 10) {
      rejected_samples_.push_back(spec.id + (spec.name.empty() ? "" : " (" + spec.name + ")") + ": " + s.ToString());
    }
    return;
  }
  double slowest = 1.0;
  if (options_.scale_by_gpu_speed) {
    for (const GpuType& t : config_.catalog.types()) slowest = std::max(slowest, 1.0 / t.relative_speed);
  }
  // No job is killed for its limit unless the trace says so: evictions and restarts
  // cannot stretch a run past this.
  DurationMs worst_run = static_cast<DurationMs>(static_cast<double>(tj.duration_ms) * slowest) + kHourMs;
  spec.time_limit_ms = tj.spec.time_limit_ms > 0 ? tj.spec.time_limit_ms : worst_run;
  if (spec.estimated_duration_ms == 0) spec.estimated_duration_ms = std::max<DurationMs>(tj.duration_ms, 1);
  if (options_.no_estimates) {
    spec.estimated_duration_ms = 0;
  } else if (options_.estimate_error > 0) {
    std::mt19937_64 rng(options_.seed * 1000003 + i);
    std::uniform_real_distribution<double> noise(1 - options_.estimate_error, 1 + options_.estimate_error);
    spec.estimated_duration_ms = std::max<DurationMs>(1, std::llround(spec.estimated_duration_ms * noise(rng)));
  }
  if (DurationMs predicted = predictor_.Predict(spec); predicted > 0) {
    spec.predicted_duration_ms = predicted;
    js.predicted_ms = predicted;
  }
  if (spec.request.sharing != SharingMode::kExclusive) has_partial_ = true;
  js.remaining_ms = tj.duration_ms;
  js.checkpoint_ms =
      tj.checkpoint_interval_ms > 0 ? tj.checkpoint_interval_ms : options_.default_checkpoint_interval_ms;
  js.spec = std::make_shared<const JobSpec>(std::move(spec));
  Enqueue({.spec = js.spec, .submit_ms = tj.submit_ms, .arrival = i + 1}, i);
}

bool Simulation::FitsGuarantee(const JobSpec& spec, int team) const {
  return JobGpuShare(spec.request, config_.catalog) <= team_guarantee_[team] + 1e-9;
}

// A new or evicted job joins the queue's unordered tail; the next cycle's Order places it.
void Simulation::Enqueue(PendingJob job, size_t trace_index) {
  jobs_[trace_index].queued_since = snap_.now_ms;
  team_waiting_[jobs_[trace_index].team]++;
  if (FitsGuarantee(*job.spec, jobs_[trace_index].team)) team_waiting_fit_[jobs_[trace_index].team]++;
  const double share = JobGpuShare(job.spec->request, config_.catalog);
  usable_idle_.Add(*job.spec, share);
  team_shapes_[jobs_[trace_index].team].Add(*job.spec, share);
  snap_.pending.push_back(std::move(job));
}

void Simulation::Start(const StartDecision& s) {
  const PendingJob& pending = snap_.pending[s.pending_index];
  size_t job = TraceIndex(pending);
  JobState& js = jobs_[job];
  const JobSpec& spec = *pending.spec;
  for (const NodeShare& ns : s.placement.nodes) {
    for (const GpuShare& g : ns.gpus) {
      int& count = gpu_jobs_[node_gpu_offset_[ns.node] + g.gpu];
      if (count++ == 0 && !snap_.nodes[ns.node].gpus[g.gpu].mig_enabled) idle_gpus_--;
    }
    TouchNode(static_cast<size_t>(ns.node));
  }
  js.gpu_speed = 1.0;
  if (options_.scale_by_gpu_speed && !s.placement.nodes.empty()) {
    js.gpu_speed = config_.catalog.Get(snap_.nodes[s.placement.nodes[0].node].gpu_type()).relative_speed;
  }
  js.shared_speed = 1.0;
  js.work_done_ms = 0;
  js.progress_t = snap_.now_ms;
  js.overhead_left_ms = js.overhead_ms;
  js.overhead_ms = 0;
  js.deadline = snap_.now_ms + spec.time_limit_ms;
  if (js.first_start < 0) js.first_start = snap_.now_ms;
  js.share = PlacementShare(s.placement, spec.request.sharing);
  allocated_ += js.share;
  js.asked = JobGpuShare(spec.request, config_.catalog);
  useful_ += js.asked;
  team_alloc_[js.team] += js.share;
  team_waiting_[js.team]--;
  if (FitsGuarantee(spec, js.team)) team_waiting_fit_[js.team]--;
  const double share = JobGpuShare(spec.request, config_.catalog);
  usable_idle_.Remove(spec, share);
  team_shapes_[js.team].Remove(spec, share);
  if (options_.on_decision) {
    SimDecision d{.t_ms = snap_.now_ms, .start = true, .job_id = spec.id, .gpus = {}, .for_job = ""};
    for (const NodeShare& ns : s.placement.nodes) {
      for (const GpuShare& g : ns.gpus) d.gpus.emplace_back(snap_.nodes[ns.node].id, g.gpu);
    }
    options_.on_decision(d);
  }
  RunningJob r{pending.spec, snap_.now_ms, s.placement};
  r.attained_gpu_ms = js.attained_gpu_ms;
  r.evictions = js.evictions;
  js.rate = UsageRate(r, snap_, config_.catalog, policy_.fairshare_price_weighted);
  team_rate_[js.team] += js.rate;
  running_pos_[job] = snap_.running.size();
  running_job_.push_back(job);
  const SharingMode held = s.placement.sharing;
  snap_.running.push_back(std::move(r));
  ++js.generation;
  js.shared_gpu = -1;
  if (held == SharingMode::kTimeSlice || held == SharingMode::kMps) {
    const NodeShare& ns = s.placement.nodes.front();
    js.shared_gpu = node_gpu_offset_[ns.node] + ns.gpus.front().gpu;
    gpu_sharers_[js.shared_gpu].push_back(job);
    Reshare(js.shared_gpu);  // plans this job's end too
  } else {
    PlanEnd(job);
  }
}

// Plans the running job's end from its work left and present speed, within its time limit.
void Simulation::PlanEnd(size_t job) {
  JobState& js = jobs_[job];
  Progress(js, snap_.now_ms);
  double left = std::max(0.0, static_cast<double>(js.remaining_ms) - js.work_done_ms);
  TimeMs end = snap_.now_ms + js.overhead_left_ms + static_cast<DurationMs>(std::ceil(left / Speed(js) - 1e-9));
  events_queue_.push({std::min(end, js.deadline), job, ++js.end_version, EventKind::kEnd});
}

// Each job sharing the GPU runs at SharedSpeed(mode, jobs on it) from now on: its work so
// far is kept, its end re-planned, and the useful-allocation sum follows.
void Simulation::Reshare(int gpu) {
  auto it = gpu_sharers_.find(gpu);
  if (it == gpu_sharers_.end()) return;
  const std::vector<size_t>& jobs = it->second;
  for (size_t job : jobs) {
    JobState& js = jobs_[job];
    Progress(js, snap_.now_ms);
    SharingMode mode = snap_.running[running_pos_[job]].placement.sharing;
    double speed = SharedSpeed(policy_.sharing, mode, static_cast<int>(jobs.size()));
    useful_ += js.asked * (speed - js.shared_speed);
    js.shared_speed = speed;
    PlanEnd(job);
  }
}

void Simulation::Release(size_t job) {
  JobState& js = jobs_[job];
  size_t pos = running_pos_[job];
  for (const NodeShare& ns : snap_.running[pos].placement.nodes) {
    for (const GpuShare& g : ns.gpus) {
      int& count = gpu_jobs_[node_gpu_offset_[ns.node] + g.gpu];
      if (--count == 0 && !snap_.nodes[ns.node].gpus[g.gpu].mig_enabled) idle_gpus_++;
    }
    TouchNode(static_cast<size_t>(ns.node));
  }
  if (pos + 1 != snap_.running.size()) {
    snap_.running[pos] = std::move(snap_.running.back());
    running_job_[pos] = running_job_.back();
    running_pos_[running_job_[pos]] = pos;
  }
  snap_.running.pop_back();
  running_job_.pop_back();
  allocated_ -= js.share;
  useful_ -= js.asked * js.shared_speed;
  js.shared_speed = 1.0;
  ++js.end_version;  // its planned end is void
  if (js.shared_gpu >= 0) {
    std::vector<size_t>& sharers = gpu_sharers_[js.shared_gpu];
    std::erase(sharers, job);
    int gpu = js.shared_gpu;
    js.shared_gpu = -1;
    if (sharers.empty()) {
      gpu_sharers_.erase(gpu);
    } else {
      Reshare(gpu);
    }
  }
  team_alloc_[js.team] -= js.share;
  team_rate_[js.team] -= js.rate;
}

void Simulation::Finish(size_t job) {
  Release(job);
  jobs_[job].end = snap_.now_ms;
  jobs_[job].done = true;
  predictor_.Observe(*jobs_[job].spec, trace_.jobs[job].duration_ms);
}

// The evicted job keeps the work up to its last periodic checkpoint, pays the restart
// overhead on its next run, and requeues with its original submit time.
void Simulation::Stop(size_t job) {
  JobState& js = jobs_[job];
  const RunningJob& r = snap_.running[running_pos_[job]];
  DurationMs ran = snap_.now_ms - r.start_ms;
  Progress(js, snap_.now_ms);
  double work = js.work_done_ms;  // on the original hardware, alone
  DurationMs saved = 0;
  if (js.checkpoint_ms > 0) saved = static_cast<DurationMs>(work / js.checkpoint_ms) * js.checkpoint_ms;
  js.remaining_ms = std::max<DurationMs>(1, js.remaining_ms - saved);
  js.overhead_ms = options_.restart_overhead_ms;
  js.attained_gpu_ms += static_cast<double>(ran) * js.share;
  if (js.evictions++ == 0) ++jobs_preempted_;
  js.generation++;  // the run's end event is void now
  JobSpecPtr spec = r.spec;
  Release(job);
  ++preemptions_;
  PendingJob again{.spec = spec,
                   .submit_ms = trace_.jobs[job].submit_ms,
                   .attained_gpu_ms = js.attained_gpu_ms,
                   .evictions = js.evictions,
                   .arrival = job + 1};
  Enqueue(std::move(again), job);
}

void Simulation::Cycle(bool for_autoscaler) {
  if (policy_.fairshare_weight != 0) snap_.team_usage = ledger_.usage();
  queue_.Order(snap_, {policy_, config_.catalog, options_.quotas, largest_node_});
  if (policy_.preemption_enabled) {
    // The engine weighs lost work from each running job's last checkpoint.
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      RunningJob& r = snap_.running[i];
      JobState& js = jobs_[running_job_[i]];
      if (js.checkpoint_ms <= 0) continue;
      // Work since the last checkpoint, at the present speed, gives its time.
      Progress(js, snap_.now_ms);
      double work = js.work_done_ms;
      double since = std::fmod(work, static_cast<double>(js.checkpoint_ms));
      r.last_checkpoint_ms = work >= static_cast<double>(js.checkpoint_ms)
                                 ? snap_.now_ms - static_cast<DurationMs>(since / Speed(js))
                                 : -1;
    }
  }
  Plan plan = engine_.Schedule(snap_, {.explain = for_autoscaler, .pending_in_order = true});
  ++cycles_;
  if (for_autoscaler) {  // what more nodes would start, for the autoscaler (taken before the starts)
    demand_.clear();
    reserved_at_.clear();
    for (const Reservation& r : plan.reservations) reserved_at_[r.job_id] = r.start_ms;
    for (const WaitingJob& w : plan.waiting) {
      if (w.code == WaitCode::kQuota || w.code == WaitCode::kHeld || w.code == WaitCode::kPreempting) continue;
      const size_t job = TraceIndex(snap_.pending[w.pending_index]);
      auto reserved = reserved_at_.find(w.job_id);
      demand_.push_back({jobs_[job].spec.get(), jobs_[job].queued_since,
                         reserved == reserved_at_.end() ? kNever : reserved->second, false});
    }
  }
  // Starts first: they name jobs by their place in the queue, which a nomination changes.
  // (Running jobs only grow at the back, so the evictions' indices stay good.)
  for (const StartDecision& s : plan.starts) Start(s);
  queue_.TakeStarted(snap_.pending, plan);
  for (const Preemption& p : plan.preemptions) {
    size_t job = running_job_[p.running_index];
    snap_.running[p.running_index].stop_at_ms = p.stop_at_ms;
    if (options_.on_decision) {
      options_.on_decision(
          {.t_ms = snap_.now_ms, .start = false, .job_id = p.job_id, .gpus = {}, .for_job = p.for_job});
    }
    events_queue_.push({p.stop_at_ms, job, jobs_[job].generation, EventKind::kStop});
    queue_.Nominate(snap_.pending, p.for_job);
  }
}

void Simulation::Account(TimeMs t) {
  double dt = static_cast<double>(t - last_t_);
  if (dt <= 0) return;
  alloc_gpu_ms_ += allocated_ * dt;
  useful_gpu_ms_ += useful_ * dt;
  live_gpu_ms_ += live_gpus_ * dt;
  if (Waiting() > 0) {
    queued_ms_ += dt;
    alloc_when_queued_gpu_ms_ += allocated_ * dt;
    usable_idle_when_queued_gpu_ms_ += UsableIdleGpus() * dt;
    live_when_queued_gpu_ms_ += live_gpus_ * dt;
  }
  for (size_t k = 0; k < teams_.size(); ++k) team_gpu_ms_[k] += team_alloc_[k] * dt;
  if (policy_.fairshare_weight != 0) {
    std::map<std::string, double> rates;
    for (size_t k = 0; k < teams_.size(); ++k) {
      if (team_rate_[k] > 1e-15) rates[teams_[k]] = team_rate_[k];
    }
    ledger_.Advance(t, rates);
  }
  log_.push_back({last_t_, allocated_, static_cast<int>(Waiting()), team_log_.size()});
  team_log_.insert(team_log_.end(), team_alloc_.begin(), team_alloc_.end());
  last_t_ = t;
}

double Simulation::UsableIdleGpus() {
  // Every GPU busy (idle_gpus_ is kept for the fixed nodes only): nothing to look at.
  if (idle_gpus_ == 0 && !Elastic()) return 0;
  CountIdle();
  return usable_idle_.Count(node_types_, node_idle_);
}

void Simulation::CountIdle() {
  const size_t count = snap_.nodes.size();
  node_types_.resize(count);
  node_idle_.assign(count, 0);
  for (size_t n = 0; n < count; ++n) {
    const Node& node = snap_.nodes[n];
    node_types_[n] = node.gpu_type();
    if (!node.schedulable()) continue;
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      const Gpu& gpu = node.gpus[g];
      if (gpu_jobs_[node_gpu_offset_[n] + g] == 0 && !gpu.mig_enabled && gpu.health == GpuHealth::kHealthy) {
        node_idle_[n]++;
      }
    }
  }
}

std::vector<int> Simulation::MaxGpusPerType(const std::vector<Node>& nodes, const std::vector<NodePool>& pools,
                                            const GpuCatalog& catalog) {
  std::vector<int> most(catalog.size(), 0);
  auto widen = [&](GpuTypeId type, int gpus) {
    if (type < most.size()) most[type] = std::max(most[type], gpus);
  };
  for (const Node& n : nodes) widen(n.gpu_type(), static_cast<int>(n.gpus.size()));
  for (const NodePool& pool : pools) widen(pool.type, pool.gpus_per_node);
  return most;
}

void Simulation::UpdateTeamClocks() {
  const QuotaConfig& quotas = options_.quotas;
  if (quotas.SharesEqually()) {
    std::set<std::string> with_work;
    for (size_t k = 0; k < teams_.size(); ++k) {
      if (team_waiting_[k] > 0 || team_alloc_[k] > 1e-9) with_work.insert(teams_[k]);
    }
    snap_.equal_share = EqualShareNow(quotas, snap_.nodes, with_work);
  }
  std::map<std::string, WaitingTeam> waiting;
  for (size_t k = 0; k < teams_.size(); ++k) {
    if (team_waiting_[k] > 0) waiting[teams_[k]] = {team_alloc_[k], quotas.GuaranteeOf(teams_[k], snap_.equal_share)};
  }
  clocks_.Update(snap_.now_ms, waiting);
  clocks_.CopyTo(snap_);
}

void Simulation::ScheduleWake(TimeMs now) {
  TimeMs at = clocks_.NextThreshold(policy_, now, snap_.running);
  if (at == kNever || at == wake_at_) return;
  wake_at_ = at;
  events_queue_.push({at, 0, 0, EventKind::kWake});
}

SimResult Simulation::Run() {
  jobs_.resize(trace_.jobs.size());
  running_pos_.assign(trace_.jobs.size(), 0);
  size_t next = 0;
  if (!trace_.jobs.empty()) t0_ = last_t_ = trace_.jobs.front().submit_ms;
  ledger_.Advance(t0_, {});
  snap_.now_ms = t0_;
  for (size_t p = 0; p < options_.autoscaler.pools.size(); ++p) {  // each pool's minimum, up from the start
    for (int i = 0; i < options_.autoscaler.pools[p].min_nodes; ++i) {
      RequestNode(p);
      NodeUp(snap_.nodes.size() - 1);
    }
    // Recorded reclaims up to the trace's last submission (later ones would only stretch the run).
    const TimeMs last_submit = trace_.jobs.empty() ? t0_ : trace_.jobs.back().submit_ms;
    for (DurationMs at : options_.autoscaler.pools[p].reclaim_times) {
      if (t0_ + at <= last_submit) events_queue_.push({t0_ + at, p, 0, EventKind::kTraceReclaim});
    }
  }
  while (next < trace_.jobs.size() || !events_queue_.empty()) {
    TimeMs t = kNever;
    bool scale_due = false;
    if (next < trace_.jobs.size()) t = trace_.jobs[next].submit_ms;
    if (!events_queue_.empty()) t = std::min(t, std::get<0>(events_queue_.top()));
    Account(t);
    snap_.now_ms = t;
    bool changed = false;
    while (!events_queue_.empty() && std::get<0>(events_queue_.top()) == t) {
      auto [when, job, generation, kind] = events_queue_.top();
      events_queue_.pop();
      if (kind == EventKind::kWake) {
        changed = changed || when == wake_at_;  // else a threshold since passed by
        continue;
      }
      if (kind == EventKind::kNodeUp || kind == EventKind::kReclaim || kind == EventKind::kScale ||
          kind == EventKind::kTraceReclaim) {
        if (kind == EventKind::kTraceReclaim) {
          quiet_ticks_ = 0;
          ReclaimFromTrace(job);
        } else if (kind == EventKind::kScale) {
          scale_tick_at_ = kNever;
          scale_due = true;
        } else if (slots_[job].incarnation == generation) {
          quiet_ticks_ = 0;
          kind == EventKind::kNodeUp ? NodeUp(job) : Reclaim(job);
        }
        changed = true;
        continue;
      }
      const JobState& js = jobs_[job];
      if (js.done || generation != (kind == EventKind::kEnd ? js.end_version : js.generation)) continue;  // superseded
      if (kind == EventKind::kStop && snap_.running[running_pos_[job]].stop_at_ms != when) continue;
      kind == EventKind::kEnd ? Finish(job) : Stop(job);
      quiet_ticks_ = 0;
      changed = true;
      ++events_;
    }
    while (next < trace_.jobs.size() && trace_.jobs[next].submit_ms == t) {
      quiet_ticks_ = 0;
      Admit(next++);
      changed = true;
      ++events_;
    }
    UpdateTeamClocks();
    // Preemption can free GPUs held by others, so a full cluster may still change.
    bool may_start = idle_gpus_ > 0 || has_partial_ || policy_.preemption_enabled;
    // The autoscaler's tick runs a cycle even on a full cluster: its waiting jobs are the demand.
    if (Waiting() > 0 && ((changed && may_start) || scale_due)) {
      Cycle(scale_due);
    } else if (scale_due) {
      demand_.clear();
    }
    if (Elastic() && (changed || scale_due)) {
      if (scale_due) Autoscale();
      ScheduleScaleTick(next < trace_.jobs.size());
    }
    UpdateTeamClocks();  // the starts may have stopped clocks (as the server's cycle does)
    ScheduleWake(t);
    MeasureStarvation(t);
  }
  MeasureStarvation(last_t_);
  SimResult r;
  Summarize(r);
  return r;
}

void Simulation::KeepJobs(SimResult& r) const {
  auto since_first = [&](TimeMs t) { return t < 0 ? -1.0 : static_cast<double>(t - t0_) / 1000.0; };
  r.jobs.reserve(jobs_.size());
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const JobState& js = jobs_[i];
    const TraceJob& tj = trace_.jobs[i];
    SimJob row{.id = tj.spec.id, .team = tj.spec.team, .user = tj.spec.user, .gpu_types = {}};
    for (const std::string& type : tj.spec.request.gpu_types)
      row.gpu_types += (row.gpu_types.empty() ? "" : "|") + type;
    row.gpus = JobGpuShare(tj.spec.request, config_.catalog);
    row.submit_s = since_first(tj.submit_ms);
    row.first_start_s = since_first(js.first_start);
    row.end_s = js.done ? since_first(js.end) : -1;
    row.run_s = static_cast<double>(tj.duration_ms) / 1000.0;
    row.evictions = js.evictions;
    row.rejected = js.rejected;
    r.jobs.push_back(std::move(row));
  }
}

void Simulation::Summarize(SimResult& r) {
  if (Elastic()) cluster_gpus_ = std::max(peak_gpus_, static_cast<int>(fixed_gpus_));  // the charts' scale
  r.policy = options_.policy;
  r.cluster_gpus = cluster_gpus_;
  r.jobs_total = static_cast<int>(trace_.jobs.size());
  r.jobs_rejected = rejected_;
  r.rows_skipped = static_cast<int>(trace_.skipped.size());
  r.rejected_samples = rejected_samples_;
  r.events = events_;
  r.cycles = cycles_;
  r.preemptions = preemptions_;
  r.jobs_preempted = jobs_preempted_;
  TimeMs t_end = t0_;
  std::vector<double> jct, delay, prediction_error;
  std::vector<double> team_run(teams_.size(), 0), team_jct(teams_.size(), 0);
  std::vector<std::vector<double>> team_delay(teams_.size());
  std::vector<int> team_jobs(teams_.size(), 0);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const JobState& js = jobs_[i];
    if (!js.rejected) team_jobs[js.team]++;
    if (!js.done) continue;
    const TraceJob& tj = trace_.jobs[i];
    ++r.jobs_completed;
    t_end = std::max(t_end, js.end);
    double j = static_cast<double>(js.end - tj.submit_ms) / 1000.0;
    double q = static_cast<double>(js.first_start - tj.submit_ms) / 1000.0;
    jct.push_back(j);
    delay.push_back(q);
    team_run[js.team] += static_cast<double>(tj.duration_ms) / 1000.0;
    team_jct[js.team] += j;
    team_delay[js.team].push_back(q);
    if (js.predicted_ms > 0 && tj.duration_ms > 0) {
      prediction_error.push_back(std::abs(static_cast<double>(js.predicted_ms - tj.duration_ms)) /
                                 static_cast<double>(tj.duration_ms));
    }
  }
  if (options_.keep_jobs) KeepJobs(r);
  std::sort(prediction_error.begin(), prediction_error.end());
  r.predicted_jobs = static_cast<int>(prediction_error.size());
  r.prediction_error_mean = Mean(prediction_error);
  r.prediction_error_p50 = Percentile(prediction_error, 0.5);
  r.makespan_s = static_cast<double>(t_end - t0_) / 1000.0;
  double span_ms = static_cast<double>(t_end - t0_);
  r.gpu_utilization = span_ms > 0 ? alloc_gpu_ms_ / (cluster_gpus_ * span_ms) : 0;
  r.useful_gpu_utilization = span_ms > 0 ? useful_gpu_ms_ / (cluster_gpus_ * span_ms) : 0;
  r.gpu_utilization_when_queued = queued_ms_ > 0 ? alloc_when_queued_gpu_ms_ / (cluster_gpus_ * queued_ms_) : -1;
  const double wanted_gpu_ms = alloc_when_queued_gpu_ms_ + usable_idle_when_queued_gpu_ms_;
  r.gpu_utilization_when_queued_usable = queued_ms_ > 0 && wanted_gpu_ms > 0 ? alloc_when_queued_gpu_ms_ / wanted_gpu_ms
                                         : queued_ms_ > 0                    ? 1
                                                                             : -1;
  if (Elastic()) {  // over the GPUs there were, not a fixed size
    r.gpu_utilization = live_gpu_ms_ > 0 ? alloc_gpu_ms_ / live_gpu_ms_ : 0;
    r.useful_gpu_utilization = live_gpu_ms_ > 0 ? useful_gpu_ms_ / live_gpu_ms_ : 0;
    r.gpu_utilization_when_queued =
        live_when_queued_gpu_ms_ > 0 ? alloc_when_queued_gpu_ms_ / live_when_queued_gpu_ms_ : -1;
    SummarizePools(r);
  }
  std::sort(jct.begin(), jct.end());
  std::sort(delay.begin(), delay.end());
  r.jct_mean_s = Mean(jct);
  r.jct_p50_s = Percentile(jct, 0.50);
  r.jct_p95_s = Percentile(jct, 0.95);
  r.jct_p99_s = Percentile(jct, 0.99);
  r.queue_delay_mean_s = Mean(delay);
  r.queue_delay_p50_s = Percentile(delay, 0.50);
  r.queue_delay_p95_s = Percentile(delay, 0.95);
  r.queue_delay_p99_s = Percentile(delay, 0.99);
  r.queue_delay_max_s = delay.empty() ? 0 : delay.back();
  double total_gpu_ms = 0;
  for (double g : team_gpu_ms_) total_gpu_ms += g;
  double sum_x = 0, sum_x2 = 0;
  int n = 0;
  for (size_t k = 0; k < teams_.size(); ++k) {
    TeamMetrics& tm = r.per_team[teams_[k]];
    tm.jobs = team_jobs[k];
    tm.gpu_hours = team_gpu_ms_[k] / 3.6e6;
    tm.share_of_gpu_hours = total_gpu_ms > 0 ? team_gpu_ms_[k] / total_gpu_ms : 0;
    tm.queue_delay_mean_s = Mean(team_delay[k]);
    tm.queue_delay_max_s = team_delay[k].empty() ? 0 : *std::max_element(team_delay[k].begin(), team_delay[k].end());
    tm.max_starvation_s = team_max_starve_ms_[k] / 1000.0;
    tm.max_starvation_fitting_guarantee_s = team_max_starve_fit_ms_[k] / 1000.0;
    tm.max_starvation_rescuable_s = team_max_starve_allowed_ms_[k] / 1000.0;
    r.max_team_starvation_rescuable_s = std::max(r.max_team_starvation_rescuable_s, tm.max_starvation_rescuable_s);
    r.max_team_starvation_s = std::max(r.max_team_starvation_s, tm.max_starvation_s);
    r.max_team_starvation_fitting_guarantee_s =
        std::max(r.max_team_starvation_fitting_guarantee_s, tm.max_starvation_fitting_guarantee_s);
    if (team_jct[k] > 0) {
      double x = team_run[k] / team_jct[k];  // the team's run time over its completion time
      sum_x += x;
      sum_x2 += x * x;
      ++n;
    }
  }
  r.jain_fairness = n > 0 && sum_x2 > 0 ? sum_x * sum_x / (n * sum_x2) : 1.0;
  r.jct_sorted_s = std::move(jct);
  r.queue_delay_sorted_s = std::move(delay);

  // Time-weighted averages over equal buckets.
  int buckets = std::max(1, options_.series_points);
  SimSeries& s = r.series;
  double width = std::max(1.0, span_ms / buckets);
  s.t_s.resize(buckets);
  s.utilization.assign(buckets, 0);
  s.queued.assign(buckets, 0);
  for (const std::string& team : teams_) s.team_gpus[team].assign(buckets, 0);
  for (int b = 0; b < buckets; ++b) s.t_s[b] = b * width / 1000.0;
  for (size_t i = 0; i < log_.size(); ++i) {
    double a = static_cast<double>(log_[i].t - t0_);
    double z = i + 1 < log_.size() ? static_cast<double>(log_[i + 1].t - t0_) : static_cast<double>(last_t_ - t0_);
    for (int b = static_cast<int>(a / width); b < buckets && b * width < z; ++b) {
      double overlap = std::min(z, (b + 1) * width) - std::max(a, b * width);
      if (overlap <= 0) continue;
      double w = overlap / width;
      s.utilization[b] += w * log_[i].allocated / std::max(1, cluster_gpus_);
      s.queued[b] += w * log_[i].queued;
      // Teams first seen later have no value in earlier entries.
      size_t end = i + 1 < log_.size() ? log_[i + 1].team_offset : team_log_.size();
      for (size_t k = 0; log_[i].team_offset + k < end; ++k) {
        s.team_gpus[teams_[k]][b] += w * team_log_[log_[i].team_offset + k];
      }
    }
  }
}

}  // namespace sim_internal

Expected<SimResult> Simulate(const std::vector<Node>& nodes, const Trace& trace, const ConfigSet& config,
                             const SimOptions& options) {
  auto policy = PolicyConfig(options.policy, config.scheduler);
  if (!policy) return policy.status();
  if (nodes.empty() && !options.autoscaler.enabled()) return Status::Invalid("cluster", "the cluster has no nodes");
  if (options.estimate_error < 0 || options.estimate_error >= 1) {
    return Status::Invalid("estimate_error", "must be within [0, 1)");
  }
  sim_internal::Simulation sim(nodes, trace, config, *policy, options);
  return sim.Run();
}

}  // namespace gantry
