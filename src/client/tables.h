// Text renderings of API answers for people: fixed-width tables, one line per item.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "client/time_display.h"

namespace gantry {

// The id people know a job by: "12_3" for task 3 of array 12, else its id.
std::string ShownJobId(const nlohmann::json& job);
// An action's answer on several tasks (an array's id, or "12_[4-5]"): "array 12: held 4 of
// 6 tasks (only pending tasks are); now 2 running, 4 pending"; false (nothing printed) for
// an answer on one job.
bool PrintActedOn(std::ostream& out, const nlohmann::json& answer, const char* done, const char* note);
// "a100-80gb-0[0,1]" style summary of a job's placement.
std::string PlacementSummary(const nlohmann::json& placement);
void PrintJobs(std::ostream& out, const nlohmann::json& body, const TimeStyle& style);
void PrintJob(std::ostream& out, const nlohmann::json& job, const nlohmann::json& events, const TimeStyle& style);
void PrintQueue(std::ostream& out, const nlohmann::json& body, const std::string& only_id, const TimeStyle& style);
void PrintNodes(std::ostream& out, const nlohmann::json& body);
// GET /v1/pools: a line per node pool (nodes busy/idle/requested against min..max, price,
// hooks running), then each pool's last failure.
void PrintPools(std::ostream& out, const nlohmann::json& body);
void PrintCluster(std::ostream& out, const nlohmann::json& body);
void PrintAudit(std::ostream& out, const nlohmann::json& body, const TimeStyle& style);

}  // namespace gantry
