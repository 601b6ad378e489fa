// The simulator's count of idle GPUs that work waiting in the queue could have used: an idle
// GPU counts when some waiting job could have started on it then (a GPU type it allows and
// that can serve it, and for whole GPUs enough idle GPUs of one type on enough nodes for
// its gang's equal parts), and no more of them count than the jobs that could start ask
// for. A T4 idle while only H100 work waits does not count; neither do the free part of a
// shared GPU or free MIG slices (only GPUs no job holds are idle here), and a job's CPUs,
// host memory and node labels are not weighed (the traces the simulator reads give none
// but the GPU type). The gang layouts are the engine's own (sched/demand.h).
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/job.h"
#include "sched/demand.h"

namespace gantry {

class UsableIdle {
 public:
  // `max_gpus_per_type[t]`: the most GPUs one node of type t has (bounds a gang's layouts,
  // as in the engine).
  UsableIdle(const GpuCatalog& catalog, std::vector<int> max_gpus_per_type)
      : catalog_(catalog), max_gpus_per_type_(std::move(max_gpus_per_type)) {}

  // A job joined the queue / left it (started). `gpus` is its GPU share (JobGpuShare).
  void Add(const JobSpec& spec, double gpus) { Change(spec, gpus, +1); }
  void Remove(const JobSpec& spec, double gpus) { Change(spec, gpus, -1); }

  // `types[n]` is node n's GPU type, `idle[n]` how many of its GPUs no job holds (0 for a
  // node that takes no work: down, draining, not yet up). The idle GPUs some waiting job
  // could start on, at most what those jobs ask for in all.
  double Count(const std::vector<GpuTypeId>& types, const std::vector<int>& idle) const;

 private:
  // What decides where a waiting job could start.
  struct Shape {
    uint64_t types = 0;  // the GPU types it allows that can serve it
    int gpus = 0;        // whole GPUs; 0 for a share of one
    int num_nodes = 0;   // as asked (0: as few as possible)
    auto operator<=>(const Shape&) const = default;
  };
  struct Waiting {
    std::vector<GangShape> layouts;  // whole GPUs: the engine's options; a share: {1 x 1}
    int jobs = 0;
    double gpus = 0;  // their GPU shares, summed
  };
  void Change(const JobSpec& spec, double gpus, int sign);

  const GpuCatalog& catalog_;
  std::vector<int> max_gpus_per_type_;
  std::map<Shape, Waiting> waiting_;
};

}  // namespace gantry
