// Job specifications: who runs what, and the GPU request the scheduler must satisfy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/container_spec.h"
#include "core/gpu_catalog.h"
#include "core/node.h"
#include "core/time.h"

namespace gantry {

// kAuto: a fraction that named no mode; the site's default for the node it lands on decides
// (SharingConfig), at each start. A placement's mode is never kAuto.
enum class SharingMode : uint8_t { kExclusive, kTimeSlice, kMps, kMig, kAuto };

const char* ToString(SharingMode m);
bool ParseSharingMode(const std::string& s, SharingMode* out);

constexpr int32_t kMilliPerGpu = 1000;
// The most nodes (ranks) one job spans.
constexpr int kMaxNodesPerJob = 4096;

// What a job needs. Exactly one of: whole GPUs (gpus >= 1, exclusive), a fraction of one
// GPU (gpu_milli in 1..1000 with time-slice, MPS or auto), or one MIG instance (mig_profile).
struct GpuRequest {
  SharingMode sharing = SharingMode::kExclusive;
  int gpus = 1;                        // whole GPUs in total (split evenly over num_nodes)
  int32_t gpu_milli = 0;               // fraction x 1000 for time-slice, MPS and auto
  std::string mig_profile;             // e.g. "3g.40gb" for MIG
  int mps_thread_percent = 0;          // MPS active-thread percentage; 0: derived from gpu_milli
  int64_t gpu_memory_mib = 0;          // minimum GPU memory (whole, time-slice) or MPS pinned limit
  std::vector<std::string> gpu_types;  // allowed types; empty means any
  bool prefer_listed_order = false;    // gpu_types is also a preference order
  int cpus = 0;                        // per node
  int64_t memory_mib = 0;              // host memory per node
  int num_nodes = 0;                   // 0: as few nodes as possible
  std::vector<int> gpu_indices;        // single-node servers: only these GPUs (pinned); empty: any

  // Bit g set: GPU g may be used (every bit when no indices are pinned).
  uint64_t gpu_index_mask() const {
    uint64_t mask = 0;
    for (int g : gpu_indices) mask |= uint64_t{1} << g;
    return gpu_indices.empty() ? ~uint64_t{0} : mask;
  }

  bool whole_gpus() const { return sharing == SharingMode::kExclusive; }
  bool fractional() const {
    return sharing == SharingMode::kTimeSlice || sharing == SharingMode::kMps || sharing == SharingMode::kAuto;
  }
};

// A soft preference: nodes whose label matches gain `weight` in scoring.
struct LabelPreference {
  std::string key;
  std::string value;
  int weight = 1;
};

// A time limit of "0" or "unlimited" (Slurm's words for no limit): the longest the cluster
// allows (scheduler.yaml time_limits.max), set when the spec is checked.
constexpr DurationMs kTimeLimitAsAllowed = -1;

struct JobSpec {
  std::string id;
  std::string user;
  std::string team;
  std::string project;
  std::string priority_class;  // one of SchedulerConfig::priority_classes
  GpuRequest request;
  std::map<std::string, std::string> node_selector;  // required node labels
  std::vector<LabelPreference> preferred_labels;
  std::vector<Taint> tolerations;  // an empty value tolerates any value of that key
  bool preemptible = true;
  bool checkpointable = false;
  DurationMs estimated_duration_ms = 0;  // 0: unknown, the time limit is used
  DurationMs time_limit_ms = 0;          // 0: the configured default; kTimeLimitAsAllowed: the maximum
  // Not submitted: the run time the controller or the simulator predicted from similar jobs
  // (sched/runtime_predictor.h) when the job gave no estimate or its user's estimates are
  // poor; the engine plans with it before the estimate. 0: none.
  DurationMs predicted_duration_ms = 0;

  // What the node agent runs (the engine ignores these).
  std::string name;                        // for people; need not be unique
  std::string command;                     // run by /bin/sh -c; empty: the job only holds GPUs
  bool submit_held = false;                // "hold: true" at submit (sbatch -H): it waits held until released
  DurationMs hold_gpus_ms = 0;             // no command, on purpose: GPUs held this long (interactive use)
  std::string working_dir;                 // absolute; empty: the agent's job directory
  std::map<std::string, std::string> env;  // extra environment variables
  int max_retries = 3;                     // restarts after a node or GPU fault
  int retries_on_failure = 0;              // restarts after the command exits non-zero
  double cost_limit = 0;                   // currency; 0: none. Alert at 80%, stopped at 100%
  // Named TCP ports the job listens on (jupyter, tensorboard): each node of the job lends
  // one to each name, given as GANTRY_PORT_<NAME> and shown as a URL.
  std::vector<std::string> ports;
  ContainerSpec container;  // run in this OCI image (container_* fields); none: on the node itself

  // Workflow (the controller's, not the engine's): an array spec at submit ("0-99%8"; each
  // task becomes a job and has none) and the dependency list ("afterok:12,singleton").
  std::string array;
  std::string dependency;

  // Who hears of the job's start, end, failure or preemption (notify: those events), and
  // how: a webhook (JSON, or Slack's {"text"} with notify_format slack), mail to mail_user.
  std::vector<std::string> notify;
  std::string webhook;
  std::string notify_format;
  std::string mail_user;

  // Set by the server, never submitted: the Kubernetes pods this job is ("namespace/name/uid",
  // one per gang member in rank order). The kubelet runs them where Gantry binds them.
  std::vector<std::string> kube_pods;
};

// Job specs are immutable once accepted and shared: a snapshot copies pointers, not specs.
using JobSpecPtr = std::shared_ptr<const JobSpec>;

// Resolves the MPS thread share: explicit, or the fraction's share of 100%.
int EffectiveMpsThreadPercent(const GpuRequest& r);

}  // namespace gantry

namespace gantry {
struct SchedulerConfig;

// Refuses requests that can never be valid, naming the field: zero or negative GPUs, a
// fraction outside (0,1] or with more than one GPU, an unknown GPU type or priority class,
// a MIG profile that no allowed type has, memory larger than any allowed type has...
// Fills in defaults (priority class, time limit) on success.
Status ValidateJobSpec(JobSpec& spec, const GpuCatalog& catalog, const SchedulerConfig& config);

// True when GPU type `t` can ever serve `r`: enough memory for the GPU or share, and the
// MIG profile when one is asked for.
bool TypeCanServe(const GpuType& t, const GpuRequest& r);

// Allowed types of a request as a bit mask over catalog ids (all types when none listed).
uint64_t AllowedTypeMask(const GpuRequest& r, const GpuCatalog& catalog);
}  // namespace gantry
