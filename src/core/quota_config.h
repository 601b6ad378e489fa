// Team quotas from team_quotas.yaml: per team a guarantee (per GPU type and/or a
// type-agnostic pool), a borrowing limit above it, a hard maximum, a fair-share weight,
// per-project limits; per-user limits; a maximum run time per priority class. GPU counts
// are GPU shares: a 0.25 fraction counts 0.25, a MIG slice its share of the GPU.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/job.h"
#include "core/status.h"
#include "core/time.h"

namespace gantry {

constexpr double kUnlimited = -1;

// A monthly budget in currency and/or GPU-hours (kUnlimited: none). Alerts at 80% and
// 100%; at 100% `hold` keeps the team's (or project's) pending jobs from starting.
struct Budget {
  double monthly_cost = kUnlimited;
  double monthly_gpu_hours = kUnlimited;
  bool hold = false;
  bool set() const { return monthly_cost >= 0 || monthly_gpu_hours >= 0; }
};

// What happens to a job flagged idle (its GPUs under the threshold for idle_after).
enum class IdleAction : uint8_t { kFlag, kStop };

struct TeamQuota {
  std::map<GpuTypeId, double> guaranteed;  // per GPU type
  double guaranteed_any = 0;               // pool usable on any type
  double borrow_limit = kUnlimited;        // GPUs above the guarantee
  double max_gpus = kUnlimited;            // hard maximum
  double weight = 1;                       // fair-share weight
  double user_max_gpus = kUnlimited;       // overrides the global per-user limit
  std::map<std::string, double> project_max_gpus;
  Budget budget;
  std::map<std::string, Budget> project_budgets;
  IdleAction idle_action = IdleAction::kFlag;
  // When set, a job's command must be one simple command (no shell syntax) whose program
  // matches one of these glob patterns ("/usr/bin/python3", "/opt/conda/envs/*/bin/python").
  std::vector<std::string> allowed_executables;
  // When set, a container job's image must match one of these glob patterns
  // ("registry.example.com/vision/*", "nvcr.io/nvidia/pytorch:*").
  std::vector<std::string> allowed_images;
  std::string webhook;  // alerts for this team (else the accounting webhook)

  double guaranteed_total() const;
  // The most GPUs this team may ever hold: min(max, guarantee + borrow limit).
  double ceiling() const;
};

// Accounting policy (the `accounting` section).
struct AccountingPolicy {
  std::string webhook;                        // POSTed a JSON alert (budgets, cost limits, idle jobs); empty: none
  double idle_threshold_pct = 5;              // a job whose GPUs stay under this utilization...
  DurationMs idle_after_ms = 30 * kMinuteMs;  // ...this long is flagged idle
  std::vector<std::string> cost_limit_exempt_classes{"critical"};  // overrun a job cost limit with an alert

  bool CostLimitExempt(const std::string& priority_class) const;
};

// What a team the file does not list is guaranteed when default_team guarantees nothing.
// kNone (the default, also with no file at all): nothing; such teams borrow, fair share
// orders them and the starvation guard bounds their wait. kEqual (`default_share: equal`):
// an equal part of the GPUs the listed guarantees leave, split among the unlisted teams
// that have work (jobs waiting or running) at the time, for the reclaim rule and the
// guarantee term. Not the default: measured, it lengthens the queueing tail
// (docs/SCHEDULING.md section 13).
enum class DefaultShare : uint8_t { kNone, kEqual };

struct QuotaConfig {
  std::map<std::string, TeamQuota> teams;
  TeamQuota default_team;  // for teams not listed
  DefaultShare default_share = DefaultShare::kNone;
  double user_max_gpus = kUnlimited;  // per user, every team
  std::map<std::string, DurationMs> class_max_runtime_ms;
  AccountingPolicy accounting;
  // Host directories a container job may mount (the host side of container_mounts must lie
  // under one); "/" itself is never mounted.
  std::vector<std::string> container_mount_roots{"/home", "/data", "/datasets", "/scratch", "/tmp"};

  const TeamQuota& Team(const std::string& team) const;
  double TotalWeight() const;
  bool Lists(const std::string& team) const { return teams.count(team) > 0; }
  // Whether unlisted teams share equally (default_share equal, default_team guaranteeing nothing).
  bool SharesEqually() const;
  // The equal part of `gpus` (the cluster's schedulable GPUs) that each of `unlisted_teams`
  // teams with work gets: what the listed guarantees leave, split equally; 0 when it does
  // not share equally or no unlisted team has work.
  double EqualShare(double gpus, size_t unlisted_teams) const;
  // A team's guarantee when unlisted teams' equal part is `equal_share`.
  double GuaranteeOf(const std::string& team, double equal_share) const;

  static Expected<QuotaConfig> FromYaml(const std::string& text, const GpuCatalog& catalog);
  static Expected<QuotaConfig> LoadFile(const std::string& path, const GpuCatalog& catalog);
};

// A job's GPU share: whole GPUs, the fraction, or for MIG the profile's compute share on
// the first allowed type that has it.
double JobGpuShare(const GpuRequest& r, const GpuCatalog& catalog);

// With an allow-list: the command must be one simple command whose program matches a
// pattern. Errors name the field "command".
Status CheckAllowedExecutable(const std::string& command, const std::vector<std::string>& allowed);

// Refuses at submission a job that exceeds every limit its team could ever reach (team
// ceiling, project limit, user limit) or its class's maximum run time, naming the field.
Status CheckQuotaAdmissible(const JobSpec& spec, const QuotaConfig& quotas, const GpuCatalog& catalog);

}  // namespace gantry
