// Simulator reports: the JSON object (docs/SIMULATION.md defines every key), a comparison
// table for the terminal, and a self-contained HTML page with SVG charts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/simulator.h"

namespace gantry {

struct PolicyRun {
  SimResult result;
  double wall_s = 0;  // wall time of the run
};

nlohmann::json SimResultToJson(const PolicyRun& run);
std::string CompareTable(const std::vector<PolicyRun>& runs);
// Per elastic run: its cost against an always-on cluster of the same peak, what spot
// saved, and each pool's node-hours, cost, peak and scaling; "" without pools.
std::string PoolTable(const std::vector<PolicyRun>& runs);
// One row per trace job and policy (each run made with SimOptions::keep_jobs): when it was
// submitted, started first and ended, its queue delay and JCT, and its evictions.
std::string JobsCsv(const std::vector<PolicyRun>& runs);
// `notes`: lines said above the table (e.g. why two policies came out the same).
std::string RenderSimHtml(const std::vector<PolicyRun>& runs, const std::string& title,
                          const std::vector<std::string>& notes = {});

}  // namespace gantry
