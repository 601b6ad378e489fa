// JSON and table renderings of simulation results.
#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/encoding.h"

namespace gantry {

nlohmann::json SimResultToJson(const PolicyRun& run) {
  const SimResult& r = run.result;
  nlohmann::json teams = nlohmann::json::object();
  for (const auto& [name, t] : r.per_team) {
    teams[name] = {{"jobs", t.jobs},
                   {"gpu_hours", t.gpu_hours},
                   {"share_of_gpu_hours", t.share_of_gpu_hours},
                   {"queue_delay_mean_s", t.queue_delay_mean_s},
                   {"queue_delay_max_s", t.queue_delay_max_s},
                   {"max_starvation_s", t.max_starvation_s},
                   {"max_starvation_fitting_guarantee_s", t.max_starvation_fitting_guarantee_s},
                   {"max_starvation_rescuable_s", t.max_starvation_rescuable_s}};
  }
  nlohmann::json doc = {
      {"policy", r.policy},
      {"cluster_gpus", r.cluster_gpus},
      {"jobs_total", r.jobs_total},
      {"jobs_completed", r.jobs_completed},
      {"jobs_rejected", r.jobs_rejected},
      {"rejected_samples", r.rejected_samples},
      {"rows_skipped", r.rows_skipped},
      {"makespan_s", r.makespan_s},
      {"gpu_utilization", r.gpu_utilization},
      {"useful_gpu_utilization", r.useful_gpu_utilization},
      {"gpu_utilization_when_queued",
       r.gpu_utilization_when_queued < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.gpu_utilization_when_queued)},
      {"gpu_utilization_when_queued_usable", r.gpu_utilization_when_queued_usable < 0
                                                 ? nlohmann::json(nullptr)
                                                 : nlohmann::json(r.gpu_utilization_when_queued_usable)},
      {"jct_mean_s", r.jct_mean_s},
      {"jct_p50_s", r.jct_p50_s},
      {"jct_p95_s", r.jct_p95_s},
      {"jct_p99_s", r.jct_p99_s},
      {"queue_delay_mean_s", r.queue_delay_mean_s},
      {"queue_delay_p50_s", r.queue_delay_p50_s},
      {"queue_delay_p95_s", r.queue_delay_p95_s},
      {"queue_delay_p99_s", r.queue_delay_p99_s},
      {"queue_delay_max_s", r.queue_delay_max_s},
      {"preemptions", r.preemptions},
      {"jobs_preempted", r.jobs_preempted},
      {"max_team_starvation_s", r.max_team_starvation_s},
      {"max_team_starvation_fitting_guarantee_s", r.max_team_starvation_fitting_guarantee_s},
      {"max_team_starvation_rescuable_s", r.max_team_starvation_rescuable_s},
      {"jain_fairness", r.jain_fairness},
      {"predicted_jobs", r.predicted_jobs},
      {"prediction_error_mean", r.prediction_error_mean},
      {"prediction_error_p50", r.prediction_error_p50},
      {"events", r.events},
      {"scheduling_cycles", r.cycles},
      {"sim_wall_s", run.wall_s},
      {"per_team", teams}};
  if (!r.pools.empty()) {
    nlohmann::json pools = nlohmann::json::array();
    for (const PoolMetrics& p : r.pools) {
      pools.push_back({{"name", p.name},
                       {"capacity", p.capacity},
                       {"node_hours", p.node_hours},
                       {"gpu_hours", p.gpu_hours},
                       {"cost", p.cost},
                       {"peak_nodes", p.peak_nodes},
                       {"nodes_requested", p.nodes_requested},
                       {"nodes_returned", p.nodes_returned},
                       {"reclaims", p.reclaims}});
    }
    doc["pools"] = std::move(pools);
    doc["cost"] = r.cost;
    doc["always_on_cost"] = r.always_on_cost;
    doc["spot_saving"] = r.spot_saving;
  }
  return doc;
}

std::string PoolTable(const std::vector<PolicyRun>& runs) {
  std::string out;
  for (const PolicyRun& run : runs) {
    const SimResult& r = run.result;
    if (r.pools.empty()) continue;
    out +=
        fmt::format("{}: cost {:.0f} (always-on at the same peak: {:.0f}, {:+.0f}%); spot saved {:.0f}\n", r.policy,
                    r.cost, r.always_on_cost,
                    r.always_on_cost > 0 ? 100 * (r.cost - r.always_on_cost) / r.always_on_cost : 0.0, r.spot_saving);
    out += fmt::format("  {:<16} {:<9} {:>10} {:>10} {:>10} {:>5} {:>9} {:>9} {:>8}\n", "pool", "capacity", "node_h",
                       "gpu_h", "cost", "peak", "requested", "returned", "reclaims");
    for (const PoolMetrics& p : r.pools) {
      out +=
          fmt::format("  {:<16} {:<9} {:>10.1f} {:>10.1f} {:>10.0f} {:>5} {:>9} {:>9} {:>8}\n", p.name, p.capacity,
                      p.node_hours, p.gpu_hours, p.cost, p.peak_nodes, p.nodes_requested, p.nodes_returned, p.reclaims);
    }
  }
  return out;
}

std::string CompareTable(const std::vector<PolicyRun>& runs) {
  std::string out = fmt::format(
      "{:<10} {:>7} {:>6} {:>6} {:>6} {:>7} {:>7} {:>10} {:>10} {:>9} {:>9} {:>10} {:>7} {:>6} {:>7} {:>9}\n", "policy",
      "done", "rej", "util", "useful", "util|q", "util|u", "jct_mean", "jct_p95", "qd_mean", "qd_p50", "qd_p95",
      "preempt", "jain", "wall_s", "events/s");
  for (const PolicyRun& run : runs) {
    const SimResult& r = run.result;
    out += fmt::format(
        "{:<10} {:>7} {:>6} {:>6.3f} {:>6.3f} {:>7.3f} {:>7.3f} {:>10.0f} {:>10.0f} {:>9.0f} {:>9.0f} {:>10.0f} {:>7} "
        "{:>6.3f} "
        "{:>7.2f} {:>9.0f}\n",
        r.policy, r.jobs_completed, r.jobs_rejected, r.gpu_utilization, r.useful_gpu_utilization,
        std::max(0.0, r.gpu_utilization_when_queued), std::max(0.0, r.gpu_utilization_when_queued_usable), r.jct_mean_s,
        r.jct_p95_s, r.queue_delay_mean_s, r.queue_delay_p50_s, r.queue_delay_p95_s, r.preemptions, r.jain_fairness,
        run.wall_s, run.wall_s > 0 ? static_cast<double>(r.events) / run.wall_s : 0.0);
  }
  if (!runs.empty()) {
    out += fmt::format("max team starvation (s), in all / while a rescue could end it:");
    for (const PolicyRun& run : runs) {
      out += fmt::format(" {}={:.0f}/{:.0f}", run.result.policy, run.result.max_team_starvation_s,
                         run.result.max_team_starvation_rescuable_s);
    }
    out += "\n";
  }
  return out;
}

std::string JobsCsv(const std::vector<PolicyRun>& runs) {
  std::string out =
      "policy,id,team,user,gpus,gpu_types,submit_s,first_start_s,end_s,queue_delay_s,jct_s,run_s,evictions,state\n";
  auto seconds = [](double s) { return s < 0 ? std::string() : fmt::format("{:.0f}", s); };
  for (const PolicyRun& run : runs) {
    for (const SimJob& j : run.result.jobs) {
      const bool started = j.first_start_s >= 0, ended = j.end_s >= 0;
      const char* state = j.rejected ? "rejected" : ended ? "done" : started ? "running" : "waiting";
      out += fmt::format("{},{},{},{},{:g},{},{},{},{},{},{},{},{},{}\n", CsvField(run.result.policy), CsvField(j.id),
                         CsvField(j.team), CsvField(j.user), j.gpus, CsvField(j.gpu_types), seconds(j.submit_s),
                         seconds(j.first_start_s), seconds(j.end_s),
                         started ? seconds(j.first_start_s - j.submit_s) : std::string(),
                         ended ? seconds(j.end_s - j.submit_s) : std::string(), seconds(j.run_s), j.evictions, state);
    }
  }
  return out;
}

}  // namespace gantry
