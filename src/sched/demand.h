// Demand: a pending job's request compiled against the catalog for one cycle (allowed
// types as a bit mask, MIG profile index per type, the node-count options of a gang), and
// its shape key: jobs with equal keys fit or fail alike, so a cycle decides each shape once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/job.h"

namespace gantry {

// One way to lay out a whole-GPU job: `nodes` nodes with `per_node` GPUs each.
struct GangShape {
  int nodes = 1;
  int per_node = 1;
};

struct Demand {
  const JobSpec* spec = nullptr;
  SharingMode mode = SharingMode::kExclusive;
  uint64_t type_mask = 0;              // allowed and able to serve the request
  std::vector<GpuTypeId> type_order;   // allowed types, most preferred first
  std::vector<GangShape> gang_shapes;  // whole GPUs: options, fewest nodes first
  int32_t milli = 0;                   // time-slice share, or MPS threads x 10
  int mps_thread_percent = 0;
  int64_t gpu_memory_mib = 0;            // minimum memory per GPU or share
  std::array<int8_t, 64> mig_profile{};  // per type id; -1 when the type lacks it
  int cpus = 0;
  int64_t memory_mib = 0;
  uint64_t gpu_mask = ~uint64_t{0};  // the GPU indices it may use (pinned jobs)
  bool spot_ok = true;               // preemptible, of a preemptible class: may run on spot nodes

  int total_gpus() const { return spec->request.gpus; }
};

// Builds the demand; `max_gpus_per_type` bounds the gang options (from ClusterState).
Demand CompileDemand(const JobSpec& spec, const GpuCatalog& catalog, const std::vector<int>& max_gpus_per_type);

// Appends to `key` bytes that are equal exactly when two jobs fit and fail on the same
// nodes (request, selector, tolerations, container or not, and `spot_ok`: whether spot
// nodes may take it; not the preferences, which only score). Jobs of several priority
// classes share a shape, so the engine diagnoses why a shape waits once, not once a class.
void AppendShapeKey(const JobSpec& spec, bool spot_ok, std::string& key);

// Memory a share of type t takes: MPS pinned limit or the fraction of the GPU's memory.
int64_t ShareMemory(const Demand& d, const GpuType& t);

// "8 GPUs", "0.25 of a GPU (time-slice)", "MIG 3g.40gb", "16 GPUs as 2 nodes x 8".
std::string DescribeRequest(const JobSpec& spec);

}  // namespace gantry
