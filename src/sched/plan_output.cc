// Text and JSON renderings of plans and status.
#include "sched/plan_output.h"

#include <fmt/format.h>

#include "sched/demand.h"

namespace gantry {

namespace {

std::string DescribeShare(const GpuShare& g, const GpuType& type, SharingMode mode) {
  switch (mode) {
    case SharingMode::kExclusive: return std::to_string(g.gpu);
    case SharingMode::kTimeSlice:
    case SharingMode::kAuto: return fmt::format("{} ({:g}, time-slice)", g.gpu, g.milli / 1000.0);
    case SharingMode::kMps:
      return fmt::format("{} ({:g}, MPS {}% threads)", g.gpu, g.milli / 1000.0, g.mps_thread_percent);
    case SharingMode::kMig:
      return fmt::format("{} (MIG {} @{})", g.gpu,
                         g.mig_profile >= 0 ? type.mig_profiles[g.mig_profile].name : std::string("?"), g.mig_start);
  }
  return "?";
}

nlohmann::json PlacementToJson(const Placement& p, const Snapshot& snap, const GpuCatalog& catalog) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeShare& ns : p.nodes) {
    const Node& node = snap.nodes[ns.node];
    const GpuType& type = catalog.Get(node.gpu_type());
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuShare& g : ns.gpus) {
      nlohmann::json j = {{"index", g.gpu}, {"uuid", node.gpus[g.gpu].uuid}, {"share", g.milli / 1000.0}};
      if (g.mps_thread_percent > 0) j["mps_thread_percent"] = g.mps_thread_percent;
      if (g.memory_mib > 0) j["memory_mib"] = g.memory_mib;
      if (g.mig_profile >= 0) {
        j["mig_profile"] = type.mig_profiles[g.mig_profile].name;
        j["mig_start"] = g.mig_start;
      }
      gpus.push_back(std::move(j));
    }
    nodes.push_back(
        {{"node", node.id}, {"gpu_type", type.name}, {"gpus", gpus}, {"cpus", ns.cpus}, {"memory_mib", ns.memory_mib}});
  }
  return nodes;
}

}  // namespace

std::string DescribePlacement(const Placement& p, const Snapshot& snap, const GpuCatalog& catalog, SharingMode mode) {
  std::string out;
  for (const NodeShare& ns : p.nodes) {
    const Node& node = snap.nodes[ns.node];
    const GpuType& type = catalog.Get(node.gpu_type());
    std::string gpus;
    for (const GpuShare& g : ns.gpus) gpus += (gpus.empty() ? "" : ",") + DescribeShare(g, type, mode);
    out += fmt::format("{}{} {} GPU{} {}", out.empty() ? "" : "; ", node.id, type.name, ns.gpus.size() == 1 ? "" : "s",
                       gpus);
  }
  return out;
}

std::string RenderPlanText(const Plan& plan, const Snapshot& snap, const GpuCatalog& catalog) {
  std::string out;
  for (const MigChange& c : plan.mig_changes) {
    const GpuType& type = catalog.Get(snap.nodes[c.node].gpu_type());
    std::string what;
    for (const MigPlacement& p : c.destroy)
      what += fmt::format(" destroy {}@{}", type.mig_profiles[p.profile].name, p.start);
    for (const MigPlacement& p : c.create)
      what += fmt::format(" create {}@{}", type.mig_profiles[p.profile].name, p.start);
    out += fmt::format("  mig      {} GPU {}:{} (for {})\n", snap.nodes[c.node].id, c.gpu, what, c.for_job);
  }
  for (const Preemption& p : plan.preemptions) {
    out += fmt::format("  evict    {:<10} for {} ({}): stops at {}\n", p.job_id, p.for_job, p.reason,
                       FormatUtc(p.stop_at_ms));
  }
  for (const StartDecision& s : plan.starts) {
    const JobSpec& spec = *snap.pending[s.pending_index].spec;
    out += fmt::format("  start    {:<10} {:<8} {:<7} {:<34} -> {}{}\n", s.job_id, spec.team, spec.priority_class,
                       DescribeRequest(spec),
                       DescribePlacement(s.placement, snap, catalog, HeldSharing(spec, s.placement)),
                       s.backfilled ? "  [backfill]" : "");
  }
  for (const WaitingJob& w : plan.waiting) {
    const JobSpec& spec = *snap.pending[w.pending_index].spec;
    out += fmt::format("  wait #{:<3} {:<10} {:<8} {:<7} {}\n", w.position, w.job_id, spec.team, spec.priority_class,
                       plan.reason(w));
  }
  if (out.empty()) out = "  (nothing to do)\n";
  return out;
}

nlohmann::json PlanToJson(const Plan& plan, const Snapshot& snap, const GpuCatalog& catalog) {
  nlohmann::json j;
  j["now"] = FormatUtc(snap.now_ms);
  j["starts"] = nlohmann::json::array();
  for (const StartDecision& s : plan.starts) {
    j["starts"].push_back(
        {{"job", s.job_id}, {"backfilled", s.backfilled}, {"placement", PlacementToJson(s.placement, snap, catalog)}});
  }
  j["mig_changes"] = nlohmann::json::array();
  for (const MigChange& c : plan.mig_changes) {
    const GpuType& type = catalog.Get(snap.nodes[c.node].gpu_type());
    auto names = [&](const std::vector<MigPlacement>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (const MigPlacement& p : v) a.push_back({{"profile", type.mig_profiles[p.profile].name}, {"start", p.start}});
      return a;
    };
    j["mig_changes"].push_back({{"node", snap.nodes[c.node].id},
                                {"gpu", c.gpu},
                                {"destroy", names(c.destroy)},
                                {"create", names(c.create)},
                                {"for_job", c.for_job}});
  }
  j["preemptions"] = nlohmann::json::array();
  for (const Preemption& p : plan.preemptions) {
    j["preemptions"].push_back(
        {{"job", p.job_id}, {"for_job", p.for_job}, {"reason", p.reason}, {"stop_at", FormatUtc(p.stop_at_ms)}});
  }
  j["reservations"] = nlohmann::json::array();
  for (const Reservation& r : plan.reservations) {
    j["reservations"].push_back({{"job", r.job_id},
                                 {"start", FormatUtc(r.start_ms)},
                                 {"placement", PlacementToJson(r.placement, snap, catalog)}});
  }
  j["waiting"] = nlohmann::json::array();
  for (const WaitingJob& w : plan.waiting) {
    nlohmann::json e = {
        {"job", w.job_id}, {"position", w.position}, {"code", ToString(w.code)}, {"reason", plan.reason(w)}};
    if (w.estimated_start_ms != kNever) e["estimated_start"] = FormatUtc(w.estimated_start_ms);
    j["waiting"].push_back(std::move(e));
  }
  return j;
}

std::string RenderStatusText(const ClusterStatus& st) {
  std::string out = fmt::format(
      "  {} nodes ({} schedulable), {} GPUs, {} available, utilization {:.2f}, {} queued, {} running\n", st.nodes,
      st.nodes_schedulable, st.total_gpus, st.available_gpus, st.utilization, st.queued, st.running);
  for (const auto& [type, cap] : st.by_type) {
    out += fmt::format("    {:<11} total {:>4}  available {:>4}  allocated {:>7.2f}\n", type, cap.total, cap.available,
                       cap.allocated);
  }
  return out;
}

nlohmann::json StatusToJson(const ClusterStatus& st) {
  nlohmann::json by_type = nlohmann::json::object();
  for (const auto& [type, cap] : st.by_type) {
    by_type[type] = {{"total", cap.total},
                     {"available", cap.available},
                     {"allocated", cap.allocated},
                     {"unavailable", cap.unavailable}};
  }
  return {{"nodes", st.nodes},
          {"nodes_schedulable", st.nodes_schedulable},
          {"total_gpus", st.total_gpus},
          {"available_gpus", st.available_gpus},
          {"allocated_gpus", st.allocated_gpus},
          {"unavailable_gpus", st.unavailable_gpus},
          {"utilization", st.utilization},
          {"queued", st.queued},
          {"running", st.running},
          {"by_type", by_type}};
}

}  // namespace gantry
