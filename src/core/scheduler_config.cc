// Parsing of scheduler_config.yaml and of human durations.
#include "core/scheduler_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "core/yaml_util.h"

namespace gantry {

extern const char kBuiltinSchedulerConfigYaml[];  // generated from config/scheduler_config.yaml

int SchedulerConfig::FindClass(const std::string& name) const {
  for (size_t i = 0; i < priority_classes.size(); ++i) {
    if (priority_classes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string SchedulerConfig::ClassNames() const {
  std::string out;
  for (const auto& c : priority_classes) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

namespace {

// Reads a duration field written as "2h" or as seconds.
DurationMs ReadDuration(YamlReader& r, const std::string& key, DurationMs fallback) {
  std::string text = r.Optional<std::string>(key, "");
  if (text.empty()) return fallback;
  auto d = ParseDuration(text);
  if (!d) {
    r.Fail(r.PathOf(key), d.status().message());
    return fallback;
  }
  return *d;
}

}  // namespace

Expected<SchedulerConfig> SchedulerConfig::FromYaml(const std::string& yaml_text) {
  auto loaded = LoadYaml(yaml_text, "scheduler_config");
  if (!loaded) return loaded.status();
  YAML::Node root = *loaded;
  SchedulerConfig c;
  YamlReader top(root, "scheduler_config");
  YAML::Node classes = top.Child("priority_classes");
  c.default_priority_class = top.Optional<std::string>("default_priority_class", c.default_priority_class);
  YAML::Node queue = top.Child("queue_order");
  YAML::Node backfill = top.Child("backfill");
  YAML::Node placement = top.Child("placement");
  YAML::Node limits = top.Child("time_limits");
  YAML::Node fair = top.Child("fair_share");
  YAML::Node preempt = top.Child("preemption");
  YAML::Node sharing = top.Child("sharing");
  YAML::Node submit_limits = top.Child("submit_limits");
  if (Status s = top.Finish(); !s.ok()) return s;

  if (!classes || !classes.IsSequence() || classes.size() == 0) {
    return Status::Invalid("priority_classes", "must be a non-empty list");
  }
  for (size_t i = 0; i < classes.size(); ++i) {
    YamlReader r(classes[i], "priority_classes[" + std::to_string(i) + "]");
    PriorityClass pc;
    pc.name = r.Required<std::string>("name");
    pc.rank = r.Required<int>("rank");
    pc.preempts_others = r.Optional<bool>("preempts_others", true);
    pc.preemptible = r.Optional<bool>("preemptible", true);
    if (Status s = r.Finish(); !s.ok()) return s;
    if (c.FindClass(pc.name) >= 0) return Status::Invalid("priority_classes", "class '" + pc.name + "' defined twice");
    c.priority_classes.push_back(pc);
  }
  std::stable_sort(c.priority_classes.begin(), c.priority_classes.end(),
                   [](const PriorityClass& a, const PriorityClass& b) { return a.rank > b.rank; });
  if (c.FindClass(c.default_priority_class) < 0) {
    return Status::Invalid("default_priority_class", "'" + c.default_priority_class + "' is not a priority class");
  }

  YamlReader q(queue, "queue_order");
  c.class_tiers = q.Optional<bool>("class_tiers", c.class_tiers);
  c.age_weight = q.Optional<double>("age_weight", c.age_weight);
  c.age_max_ms = ReadDuration(q, "age_max", c.age_max_ms);
  c.size_weight = q.Optional<double>("size_weight", c.size_weight);
  c.recalc_period_ms = ReadDuration(q, "recalc_period", c.recalc_period_ms);
  c.fairshare_weight = q.Optional<double>("fairshare_weight", c.fairshare_weight);
  c.guarantee_weight = q.Optional<double>("guarantee_weight", c.guarantee_weight);
  c.short_job_weight = q.Optional<double>("short_job_weight", c.short_job_weight);
  c.short_job_ref_gpu_hours = q.Optional<double>("short_job_ref_gpu_hours", c.short_job_ref_gpu_hours);
  if (c.short_job_ref_gpu_hours <= 0) return Status::Invalid("queue_order.short_job_ref_gpu_hours", "must be positive");
  c.las_thresholds_gpu_hours = q.Optional<std::vector<double>>("las_thresholds_gpu_hours", {});
  if (Status s = q.Finish(); !s.ok()) return s;
  if (c.age_max_ms <= 0) return Status::Invalid("queue_order.age_max", "must be positive");

  YamlReader b(backfill, "backfill");
  c.backfill_enabled = b.Optional<bool>("enabled", c.backfill_enabled);
  c.backfill_reservations = b.Optional<int>("reservations", c.backfill_reservations);
  c.backfill_depth = b.Optional<int>("depth", c.backfill_depth);
  if (Status s = b.Finish(); !s.ok()) return s;
  if (c.backfill_reservations < 0 || c.backfill_reservations > 1000) {
    return Status::Invalid("backfill.reservations", "must be within 0..1000");
  }
  if (c.backfill_depth < 0) return Status::Invalid("backfill.depth", "must be >= 0");

  YamlReader p(placement, "placement");
  std::string strategy = p.Optional<std::string>("strategy", "pack");
  c.candidates_per_type = p.Optional<int>("candidates_per_type", c.candidates_per_type);
  c.weight_pack = p.Optional<int>("weight_pack", c.weight_pack);
  c.weight_type_cost = p.Optional<int>("weight_type_cost", c.weight_type_cost);
  c.weight_nvlink = p.Optional<int>("weight_nvlink", c.weight_nvlink);
  c.weight_labels = p.Optional<int>("weight_labels", c.weight_labels);
  if (Status s = p.Finish(); !s.ok()) return s;
  if (strategy == "pack") {
    c.strategy = PlacementStrategy::kPack;
  } else if (strategy == "spread") {
    c.strategy = PlacementStrategy::kSpread;
  } else {
    return Status::Invalid("placement.strategy", "must be 'pack' or 'spread', not '" + strategy + "'");
  }
  if (c.candidates_per_type < 1) return Status::Invalid("placement.candidates_per_type", "must be >= 1");

  YamlReader f(fair, "fair_share");
  c.fairshare_half_life_ms = ReadDuration(f, "half_life", c.fairshare_half_life_ms);
  c.fairshare_price_weighted = f.Optional<bool>("price_weighted", c.fairshare_price_weighted);
  c.guarantee_max_use = f.Optional<double>("guarantee_max_use", c.guarantee_max_use);
  if (Status s = f.Finish(); !s.ok()) return s;
  if (c.fairshare_half_life_ms <= 0) return Status::Invalid("fair_share.half_life", "must be positive");
  if (!(c.guarantee_max_use >= 0)) return Status::Invalid("fair_share.guarantee_max_use", "must not be negative");
  for (size_t i = 1; i < c.las_thresholds_gpu_hours.size(); ++i) {
    if (c.las_thresholds_gpu_hours[i] <= c.las_thresholds_gpu_hours[i - 1]) {
      return Status::Invalid("queue_order.las_thresholds_gpu_hours", "must increase");
    }
  }

  YamlReader pr(preempt, "preemption");
  c.preemption_enabled = pr.Optional<bool>("enabled", c.preemption_enabled);
  c.preempt_by_priority = pr.Optional<bool>("by_priority", c.preempt_by_priority);
  c.preempt_to_reclaim = pr.Optional<bool>("reclaim", c.preempt_to_reclaim);
  c.preempt_by_service = pr.Optional<bool>("by_service", c.preempt_by_service);
  c.min_runtime_ms = ReadDuration(pr, "min_runtime", c.min_runtime_ms);
  c.max_evictions = pr.Optional<int>("max_evictions", c.max_evictions);
  c.grace_period_ms = ReadDuration(pr, "grace_period", c.grace_period_ms);
  c.reclaim_after_ms = ReadDuration(pr, "reclaim_after", c.reclaim_after_ms);
  c.reclaim_patience_ms = ReadDuration(pr, "reclaim_patience", c.reclaim_patience_ms);
  c.reclaim_victims_per_gpu = pr.Optional<double>("reclaim_victims_per_gpu", c.reclaim_victims_per_gpu);
  c.max_preemptors_per_cycle = pr.Optional<int>("max_preemptors_per_cycle", c.max_preemptors_per_cycle);
  c.starvation_bound_ms = ReadDuration(pr, "starvation_bound", c.starvation_bound_ms);
  if (Status s = pr.Finish(); !s.ok()) return s;
  if (c.max_evictions < 0) return Status::Invalid("preemption.max_evictions", "must be >= 0");
  if (!(c.reclaim_victims_per_gpu >= 0 && c.reclaim_victims_per_gpu <= 64)) {
    return Status::Invalid("preemption.reclaim_victims_per_gpu", "must be between 0 (no limit) and 64");
  }
  if (c.max_preemptors_per_cycle < 0) return Status::Invalid("preemption.max_preemptors_per_cycle", "must be >= 0");

  if (Status s = ParseSharingConfig(sharing, &c.sharing); !s.ok()) return s;

  YamlReader t(limits, "time_limits");
  c.default_time_limit_ms = ReadDuration(t, "default", c.default_time_limit_ms);
  c.max_time_limit_ms = ReadDuration(t, "max", c.max_time_limit_ms);
  if (Status s = t.Finish(); !s.ok()) return s;
  if (c.default_time_limit_ms <= 0 || c.max_time_limit_ms < c.default_time_limit_ms) {
    return Status::Invalid("time_limits", "need 0 < default <= max");
  }

  YamlReader sl(submit_limits, "submit_limits");
  c.max_jobs_per_request = sl.Optional<int>("max_jobs_per_request", c.max_jobs_per_request);
  c.max_waiting_per_user = sl.Optional<int>("max_waiting_per_user", c.max_waiting_per_user);
  c.max_waiting_per_team = sl.Optional<int>("max_waiting_per_team", c.max_waiting_per_team);
  if (Status s = sl.Finish(); !s.ok()) return s;
  for (auto [name, value] : {std::pair{"max_jobs_per_request", c.max_jobs_per_request},
                             {"max_waiting_per_user", c.max_waiting_per_user},
                             {"max_waiting_per_team", c.max_waiting_per_team}}) {
    if (value < 0) return Status::Invalid(std::string("submit_limits.") + name, "must be >= 0 (0: no limit)");
  }
  return c;
}

Expected<SchedulerConfig> SchedulerConfig::LoadFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text) return text.status();
  return FromYaml(*text);
}

const SchedulerConfig& SchedulerConfig::Builtin() {
  static const SchedulerConfig config = [] {
    auto c = FromYaml(kBuiltinSchedulerConfigYaml);
    if (!c) std::abort();  // the built-in file is checked by tests
    return std::move(*c);
  }();
  return config;
}

}  // namespace gantry
