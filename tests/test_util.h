// Builders for tests: MakeJob().Gpus(4).Team("ml"), MakeNode("n1", "A100-80GB", 8), and a
// helper to run one engine cycle on the built-in catalog and config.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/config_dir.h"
#include "core/job.h"
#include "core/node.h"
#include "sched/engine.h"
#include "sched/plan.h"

namespace gantry::testing {

// A UTC time from "2026-11-10T00:00:00Z" (throws on a typo in a test).
inline TimeMs Utc(const std::string& text) {
  TimeMs t = 0;
  if (!ParseUtc(text, &t)) throw std::invalid_argument("not a UTC time: " + text);
  return t;
}

inline const GpuCatalog& Catalog() { return GpuCatalog::Builtin(); }
inline GpuTypeId TypeId(const std::string& name) { return Catalog().Find(name)->id; }

class MakeJob {
 public:
  explicit MakeJob(std::string id = "job") {
    spec_.id = std::move(id);
    spec_.user = "alice";
    spec_.team = "ml";
    spec_.priority_class = "medium";
    spec_.time_limit_ms = 24 * kHourMs;
  }
  MakeJob& Id(std::string id) { return spec_.id = std::move(id), *this; }
  MakeJob& Team(std::string t) { return spec_.team = std::move(t), *this; }
  MakeJob& User(std::string u) { return spec_.user = std::move(u), *this; }
  MakeJob& Class(std::string c) { return spec_.priority_class = std::move(c), *this; }
  MakeJob& Gpus(int n) { return spec_.request.gpus = n, *this; }
  MakeJob& Nodes(int n) { return spec_.request.num_nodes = n, *this; }
  MakeJob& Fraction(double f, SharingMode m = SharingMode::kTimeSlice) {
    spec_.request.sharing = m;
    spec_.request.gpu_milli = static_cast<int32_t>(f * 1000 + 0.5);
    return *this;
  }
  MakeJob& Mps(double f, int64_t memory_mib = 0) {
    Fraction(f, SharingMode::kMps);
    spec_.request.gpu_memory_mib = memory_mib;
    return *this;
  }
  MakeJob& Mig(std::string profile) {
    spec_.request.sharing = SharingMode::kMig;
    spec_.request.mig_profile = std::move(profile);
    return *this;
  }
  MakeJob& Types(std::vector<std::string> t, bool ordered = false) {
    spec_.request.gpu_types = std::move(t);
    spec_.request.prefer_listed_order = ordered;
    return *this;
  }
  MakeJob& GpuMemoryMib(int64_t m) { return spec_.request.gpu_memory_mib = m, *this; }
  MakeJob& Cpus(int c) { return spec_.request.cpus = c, *this; }
  MakeJob& Selector(std::string k, std::string v) { return spec_.node_selector[k] = v, *this; }
  MakeJob& Prefer(std::string k, std::string v, int w) { return spec_.preferred_labels.push_back({k, v, w}), *this; }
  MakeJob& Tolerate(std::string k, std::string v = "") { return spec_.tolerations.push_back({k, v}), *this; }
  MakeJob& Estimate(DurationMs d) { return spec_.estimated_duration_ms = d, *this; }
  MakeJob& Limit(DurationMs d) { return spec_.time_limit_ms = d, *this; }
  MakeJob& Pin(std::vector<int> gpus) { return spec_.request.gpu_indices = std::move(gpus), *this; }

  JobSpec spec() const { return spec_; }
  operator JobSpec() const { return spec_; }  // NOLINT(google-explicit-constructor)

 private:
  JobSpec spec_;
};

inline Node MakeNode(std::string id, const std::string& type, int gpus, int nvlink_groups = 1) {
  Node n;
  n.id = std::move(id);
  n.cpus = 64;
  n.memory_mib = 512 * 1024;
  n.mps = true;
  for (int i = 0; i < gpus; ++i) {
    Gpu g;
    g.index = i;
    g.uuid = n.id + "-gpu" + std::to_string(i);
    g.type = TypeId(type);
    g.nvlink_group = i / (gpus / nvlink_groups);
    n.gpus.push_back(g);
  }
  return n;
}

// A node whose GPUs listed in `mig_gpus` are in MIG mode with `layout` (profile names).
inline Node MakeMigNode(std::string id, const std::string& type, int gpus, std::vector<int> mig_gpus,
                        const std::vector<std::string>& layout) {
  Node n = MakeNode(std::move(id), type, gpus);
  const GpuType& t = *Catalog().Find(type);
  for (int g : mig_gpus) {
    n.gpus[g].mig_enabled = true;
    std::vector<MigPlacement> placed;
    for (const std::string& p : layout) {
      int pi = t.FindMigProfile(p);
      placed.push_back({pi, *FindMigStart(t, placed, pi)});
      n.gpus[g].mig_instances.push_back({placed.back(), ""});
    }
  }
  return n;
}

inline PendingJob Pending(JobSpec spec, TimeMs submit_ms = 0) {
  return {std::make_shared<const JobSpec>(std::move(spec)), submit_ms};
}

// A running job holding whole GPUs `gpus` of node `node`, started at `start_ms`.
inline RunningJob Running(JobSpec spec, int node, std::vector<int> gpus, TimeMs start_ms = 0) {
  RunningJob r;
  r.spec = std::make_shared<const JobSpec>(std::move(spec));
  r.start_ms = start_ms;
  NodeShare ns;
  ns.node = node;
  for (int g : gpus) ns.gpus.push_back({.gpu = g});
  r.placement.nodes.push_back(ns);
  return r;
}

// The built-in config without the policies that reorder or evict (short-job weighting,
// preemption), so a test sees one mechanism at a time; tests of those turn them on.
inline const SchedulerConfig& MechanismConfig() {
  static const SchedulerConfig config = [] {
    SchedulerConfig c = SchedulerConfig::Builtin();
    c.short_job_weight = 0;
    c.preemption_enabled = false;
    return c;
  }();
  return config;
}

inline Plan Schedule(const Snapshot& snap, const SchedulerConfig& config = MechanismConfig(),
                     const QuotaConfig* quotas = nullptr) {
  return Engine(Catalog(), config, quotas).Schedule(snap);
}

inline const StartDecision* FindStart(const Plan& p, const std::string& id) {
  for (const StartDecision& s : p.starts) {
    if (s.job_id == id) return &s;
  }
  return nullptr;
}

inline const WaitingJob* FindWaiting(const Plan& p, const std::string& id) {
  for (const WaitingJob& w : p.waiting) {
    if (w.job_id == id) return &w;
  }
  return nullptr;
}

// "node:gpu,gpu;node:gpu" for compact assertions.
inline std::string Where(const Snapshot& snap, const Placement& p) {
  std::string out;
  for (const NodeShare& ns : p.nodes) {
    out += (out.empty() ? "" : ";") + snap.nodes[ns.node].id + ":";
    for (size_t i = 0; i < ns.gpus.size(); ++i) out += (i ? "," : "") + std::to_string(ns.gpus[i].gpu);
  }
  return out;
}

}  // namespace gantry::testing
