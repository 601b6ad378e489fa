// Rendering plans and cluster status for people (text) and programs (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/gpu_catalog.h"
#include "sched/apply_plan.h"
#include "sched/plan.h"

namespace gantry {

// "a100-0 GPUs 0,1" / "t4-0 GPU 2 (0.25, time-slice)" / "a100-1 GPU 3 (MIG 3g.40gb @4)".
std::string DescribePlacement(const Placement& p, const Snapshot& snap, const GpuCatalog& catalog, SharingMode mode);

std::string RenderPlanText(const Plan& plan, const Snapshot& snap, const GpuCatalog& catalog);
nlohmann::json PlanToJson(const Plan& plan, const Snapshot& snap, const GpuCatalog& catalog);

std::string RenderStatusText(const ClusterStatus& status);
nlohmann::json StatusToJson(const ClusterStatus& status);

}  // namespace gantry
