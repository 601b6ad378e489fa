// The scheduling demo: waves of submissions, one engine cycle per wave, jobs finishing
// between waves by their estimated durations.
#include "cli/demo.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/config_dir.h"
#include "core/spec_yaml.h"
#include "core/yaml_util.h"
#include "sched/apply_plan.h"
#include "sched/engine.h"
#include "sched/plan_output.h"

namespace gantry {

namespace {

struct Wave {
  DurationMs at_ms = 0;
  std::vector<JobSpec> jobs;
  std::vector<std::string> refused;  // "job-id: field: message"
};

Expected<std::vector<Wave>> LoadScenario(const std::string& path, const ConfigSet& config,
                                         const std::vector<Node>& nodes, TimeMs* start) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return Status::Invalid(path, fmt::format("cannot load: {}", e.what()));
  }
  YamlReader top(root, "scenario");
  std::string start_text = top.Required<std::string>("start");
  YAML::Node waves = top.Child("waves");
  top.Optional<std::string>("description", "");
  if (Status s = top.Finish(); !s.ok()) return s;
  if (!ParseUtc(start_text, start)) return Status::Invalid("start", "expected a UTC time like 2026-11-26T09:00:00Z");
  if (!waves || !waves.IsSequence()) return Status::Invalid("waves", "must be a list");
  std::vector<Wave> out;
  for (size_t w = 0; w < waves.size(); ++w) {
    YamlReader r(waves[w], fmt::format("waves[{}]", w));
    Wave wave;
    auto at = ParseDuration(r.Required<std::string>("at"));
    YAML::Node jobs = r.Child("jobs");
    if (Status s = r.Finish(); !s.ok()) return s;
    if (!at) return Status::Invalid(fmt::format("waves[{}].at", w), at.status().message());
    wave.at_ms = *at;
    for (size_t j = 0; jobs && j < jobs.size(); ++j) {
      auto spec = ParseJobSpec(jobs[j]);
      std::string id = jobs[j]["id"] ? jobs[j]["id"].as<std::string>() : fmt::format("wave{}-job{}", w, j);
      Status s = spec ? ValidateJobSpec(*spec, config.catalog, config.scheduler) : spec.status();
      if (s.ok()) s = CheckAdmissible(*spec, nodes, config.catalog);
      if (s.ok()) s = CheckQuotaAdmissible(*spec, config.quotas, config.catalog);
      if (!s.ok()) {
        wave.refused.push_back(fmt::format("{}: refused: {}", id, s.ToString()));
        continue;
      }
      if (spec->id.empty()) spec->id = id;
      wave.jobs.push_back(std::move(*spec));
    }
    out.push_back(std::move(wave));
  }
  return out;
}

// Removes running jobs whose estimated end has passed; returns their ids.
std::vector<std::string> FinishJobs(Snapshot& snap) {
  std::vector<std::string> done;
  std::erase_if(snap.running, [&](const RunningJob& j) {
    DurationMs d = j.spec->estimated_duration_ms > 0 ? j.spec->estimated_duration_ms : j.spec->time_limit_ms;
    if (j.start_ms + d > snap.now_ms) return false;
    done.push_back(j.spec->id);
    return true;
  });
  return done;
}

}  // namespace

int RunDemo(const DemoOptions& options, std::ostream& out, std::ostream& err) {
  auto config = LoadConfigDir(options.config_dir);
  if (!config) {
    err << "gantry demo: " << config.status().ToString() << "\n";
    return 2;
  }
  auto nodes = LoadClusterFile(options.cluster_path, config->catalog);
  if (!nodes) {
    err << "gantry demo: " << options.cluster_path << ": " << nodes.status().ToString() << "\n";
    return 2;
  }
  TimeMs start = 0;
  auto waves = LoadScenario(options.scenario_path, *config, *nodes, &start);
  if (!waves) {
    err << "gantry demo: " << options.scenario_path << ": " << waves.status().ToString() << "\n";
    return 2;
  }
  Engine engine(config->catalog, config->scheduler, &config->quotas);
  Snapshot snap;
  snap.nodes = std::move(*nodes);
  nlohmann::json cycles = nlohmann::json::array();
  if (!options.json) {
    out << fmt::format("Gantry scheduling demo: {} nodes, {} waves of jobs\n", snap.nodes.size(), waves->size());
  }
  for (const Wave& wave : *waves) {
    snap.now_ms = start + wave.at_ms;
    std::vector<std::string> evicted = RequeueStopped(snap);
    std::vector<std::string> finished = FinishJobs(snap);
    for (const JobSpec& spec : wave.jobs) snap.pending.push_back({std::make_shared<const JobSpec>(spec), snap.now_ms});
    Plan plan = engine.Schedule(snap);
    if (options.json) {
      nlohmann::json c = PlanToJson(plan, snap, config->catalog);
      c["finished"] = finished;
      c["evicted"] = evicted;
      c["refused"] = wave.refused;
      Snapshot after = snap;
      ApplyPlan(plan, after);
      c["status"] = StatusToJson(ComputeStatus(after, config->catalog));
      cycles.push_back(std::move(c));
    } else {
      out << fmt::format("\n== {}  (+{}): {} submitted, {} finished, {} evicted and requeued\n", FormatUtc(snap.now_ms),
                         FormatDuration(wave.at_ms), wave.jobs.size() + wave.refused.size(), finished.size(),
                         evicted.size());
      for (const std::string& r : wave.refused) out << "  " << r << "\n";
      out << RenderPlanText(plan, snap, config->catalog);
    }
    ApplyPlan(plan, snap);
    if (!options.json) out << "  status:\n" << RenderStatusText(ComputeStatus(snap, config->catalog));
  }
  if (options.json) out << nlohmann::json{{"cycles", cycles}}.dump(2) << "\n";
  return 0;
}

}  // namespace gantry
