// How a site shares GPUs: the mode a plain fraction gets (by node pool, by GPU type, or the
// site default; "auto" is MPS where the node's agent can run an MPS control daemon and
// time-slice elsewhere), whether time-sliced jobs may share a GPU with each other, and the
// slow-down the simulator applies to jobs that share one GPU.
#pragma once

#include <map>
#include <string>

#include "core/job.h"
#include "core/node.h"
#include "core/status.h"

namespace YAML {
class Node;
}

namespace gantry {

struct SharingConfig {
  SharingMode fraction_default = SharingMode::kAuto;  // auto, mps or time-slice
  std::string pool_label = "pool";                    // the node label that names its pool
  std::map<std::string, SharingMode> by_pool;         // pool -> mode; before by_gpu_type
  std::map<std::string, SharingMode> by_gpu_type;     // GPU type name -> mode
  // false: a time-sliced job never shares its GPU with another job: it holds (and is billed
  // for) the whole GPU. Time-slicing makes small jobs several times slower together.
  bool time_slice_packing = false;
  // Per-job speed, relative to running alone, when n jobs share one GPU in that mode (by n;
  // from the last n on, the GPU's total stays: speed(n) = speed(last) x last / n). The
  // defaults are a latency-bound PyTorch job measured on an H100 (docs/BENCHMARKS.md).
  std::map<int, double> time_slice_speed = {{2, 0.12}};
  std::map<int, double> mps_speed = {{2, 0.725}, {4, 0.578}};
};

// The mode a plain fraction (kAuto) gets on `node` with GPUs of `type`: the node pool's
// setting, else the GPU type's, else the default; auto (and mps on a node that cannot run
// MPS) becomes kMps or kTimeSlice by the node's `mps` capability.
SharingMode ResolveSharing(const SharingConfig& config, const Node& node, const GpuType& type);

// The speed of one of `jobs` jobs sharing a GPU in `mode`, relative to running alone (1
// for one job, for exclusive and MIG). Linear between the configured points.
double SharedSpeed(const SharingConfig& config, SharingMode mode, int jobs);

// A fraction's mode from text: auto, mps or time-slice (false for anything else).
bool ParseFractionSharing(const std::string& text, SharingMode* out);

// Reads the `sharing:` section (null: the defaults); errors name the field.
Status ParseSharingConfig(const YAML::Node& node, SharingConfig* out);

}  // namespace gantry
