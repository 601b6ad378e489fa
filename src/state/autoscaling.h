// The controller's side of the autoscaler: what each pool has asked its cloud for and
// got, and the calls of its hooks. Each tick it turns the engine's waiting jobs and the
// pools' nodes into the autoscaler's decision (sched/autoscaler.h) and the hook calls that
// carry it out; a hook's result comes back through Finished. Requests in flight are
// counted, so nothing is asked twice; a hook that fails, hangs or prints garbage backs
// off, and the failure shows in the log, the metrics and the waiting jobs' reason. No I/O
// and no clock here: the Controller runs the hooks (server/pool_hooks.h).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/command.h"
#include "core/node_pools.h"
#include "sched/autoscaler.h"
#include "state/metrics.h"

namespace gantry {

// One call of a pool's hook: scale-up `count` nodes, or scale-down `nodes`.
struct HookCall {
  enum class Kind : uint8_t { kScaleUp, kScaleDown };
  Kind kind = Kind::kScaleUp;
  size_t pool = 0;
  std::string pool_name;
  std::string command;
  std::vector<std::string> args;   // scale-up: POOL COUNT; scale-down: POOL ID...
  std::vector<std::string> nodes;  // scale-down: the nodes given back
  int count = 0;                   // scale-up: nodes asked for
  DurationMs timeout_ms = 0;
};
const char* ToString(HookCall::Kind k);

// A pool node as the controller has it.
struct PoolNode {
  std::string id;
  size_t pool = 0;
  bool up = false;    // registered, schedulable (not drained, not down)
  bool idle = false;  // no job on it
};

class Autoscaling {
 public:
  explicit Autoscaling(AutoscalerConfig config, const GpuCatalog& catalog);
  bool enabled() const { return config_.enabled(); }
  const AutoscalerConfig& config() const { return config_; }

  // The pool of a registering node: one whose hook printed its id, or whose agent says
  // `pool: NAME`; -1 for none. Adopt gives it the pool's labels and taints and counts it
  // as arrived.
  int PoolOf(const std::string& node_id, const std::map<std::string, std::string>& labels) const;
  void Adopt(size_t pool, Node& node);

  struct Decision {
    std::vector<HookCall> hooks;
    std::vector<std::string> drain;  // idle nodes being given back: they take no new job
    std::vector<std::string> log;
  };
  // The autoscaler's decision now, on the pools' nodes and the jobs more nodes would start.
  Decision Run(const std::vector<PoolNode>& nodes, const std::vector<ScalingDemand>& demand, TimeMs now);
  // Whether the pool's scale-up hook is running now (or was when the last controller
  // stopped, for register_timeout after this one's start: its nodes may still come).
  bool ScalingUp(const std::string& pool, TimeMs now) const;
  // The index of the pool named `name`, or -1.
  int PoolIndex(const std::string& name) const;
  // Whether pool `pool`'s scale-up hook printed `node_id` and it has not registered yet.
  bool Awaits(size_t pool, const std::string& node_id) const { return pools_[pool].awaited.count(node_id) > 0; }
  // Whether the pool's scale-up hook is running now (its ids are not known yet).
  bool UpRunning(size_t pool) const { return pools_[pool].up_running; }
  // Whether a scale-up was running when the last controller stopped (its printed ids were
  // lost with it), so new ids may join the pool for register_timeout after this start.
  bool AdoptsUnknownIds(size_t pool, TimeMs now) const {
    return pools_[pool].adopt_new_until != kNever && now < pools_[pool].adopt_new_until;
  }

  // The requests to keep across a restart or a take-over (the store's meta row
  // "autoscaler_requests"): per pool, the awaited node ids with when they were asked for,
  // and when a scale-up still running began. Changed() says whether they changed since
  // the last call.
  nlohmann::json Requests() const;
  void Restore(const nlohmann::json& requests, TimeMs now);
  bool Changed();
  bool Due(TimeMs now) const { return enabled() && now >= next_run_; }

  struct Outcome {
    std::vector<std::string> requested;  // ids a scale-up printed (awaited from now on)
    std::vector<std::string> returned;   // nodes the cloud took back: they leave the cluster
    std::vector<std::string> undrain;    // a scale-down that failed: back in service
    std::vector<std::string> log;
    std::string audit_outcome = "ok";  // "ok", "no_capacity", "failed"
    std::string audit_detail;
  };
  Outcome Finished(const HookCall& call, const CommandResult& result, TimeMs now);

  // Why a waiting job waits on the autoscaler ("" when it does not): "waiting for a node
  // from pool X (requested 2 min ago)", or the pool's last failure.
  std::string WaitReason(const std::string& job_id, TimeMs now) const;
  void WriteMetrics(MetricsWriter& w) const;
  // GET /v1/pools: each pool's settings, its nodes (by id, from `nodes`), the requests in
  // flight, its hooks and its last failure.
  nlohmann::json View(const std::vector<PoolNode>& nodes, TimeMs now) const;

 private:
  struct PoolRuntime {
    bool up_running = false;
    int up_count = 0;
    TimeMs up_started = kNever;
    bool down_running = false;
    std::map<std::string, TimeMs> awaited;  // ids the hook printed, not registered yet
    std::vector<std::string> given_up;      // awaited too long: to be given back
    TimeMs no_capacity_since = kNever;
    TimeMs adopt_new_until = kNever;  // a scale-up was running at the last controller's end
    int failures = 0;                 // in a row
    TimeMs retry_at = 0;
    std::string last_error;
    TimeMs last_error_at = kNever;
    std::map<std::string, uint64_t> counters;
  };
  TimeMs OldestRequest(const PoolRuntime& p) const;
  void Failed(PoolRuntime& p, const HookCall& call, const std::string& what, TimeMs now, Outcome& out);
  void UpFinished(PoolRuntime& p, const HookCall& call, const CommandResult& result, TimeMs now, Outcome& out);
  void GiveUpLate(TimeMs now, Decision& d);
  HookCall ScaleDown(size_t pool, std::vector<std::string> nodes) const;

  AutoscalerConfig config_;
  const GpuCatalog& catalog_;
  std::vector<PoolRuntime> pools_;
  std::map<std::string, TimeMs> idle_since_;        // pool node -> idle since
  std::set<std::string> returning_;                 // drained, being given back
  std::map<std::string, std::string> waiting_for_;  // job -> what the decision said
  std::map<std::string, size_t> waiting_pool_;      // job -> the pool it waits for
  TimeMs next_run_ = 0;
  std::string saved_;  // Requests() as last reported by Changed()
};

// Node ids printed by a scale-up hook, one per line (blank lines skipped); the error names
// the first line that is not one.
Expected<std::vector<std::string>> ParseNodeIds(const std::string& out);

}  // namespace gantry
