// Type scarcity, for the queue's reasons: whether the GPU types a waiting job may use are
// fewer than what the jobs that can use no other type ask of them (running and waiting).
// Then no ordering or starvation rescue gets that job started soon: it waits its turn on
// the type, and its reason says so ("H100-80GB is scarcer than its demand: ...").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/gpu_catalog.h"

namespace gantry {

class TypeScarcity {
 public:
  // Per type id: the GPUs on nodes that take work, and what running jobs hold
  // (ClusterState and UsageTracker count both as they are built).
  TypeScarcity(const GpuCatalog& catalog, const std::vector<int>& capacity, const std::vector<double>& running)
      : catalog_(catalog), capacity_(capacity), running_(running) {}
  // A waiting job that may run on the types of `type_mask` asks for `gpus`.
  void AddWaiting(uint64_t type_mask, double gpus);
  // Each note reads every distinct set of types waiting jobs may use: past this many sets
  // (jobs naming thousands of type lists, as a flood might), no note is given.
  static constexpr size_t kMostTypeSets = 4096;
  // The note for a job that may use the types of `type_mask`, when their GPUs are fewer
  // than the GPUs running on them plus those asked by waiting jobs that may use only
  // (some of) them; empty otherwise. Worked out once per set of types, for at most
  // kMostNotes sets (each reads every set waiting jobs may use); past them, empty.
  const std::string& Note(uint64_t type_mask);
  static constexpr size_t kMostNotes = 1024;  // every set of 10 types

 private:
  const GpuCatalog& catalog_;
  const std::vector<int>& capacity_;                 // per type id: GPUs on nodes that take work
  const std::vector<double>& running_;               // per type id: GPU shares running jobs hold
  std::map<uint64_t, double> waiting_;               // waiting jobs' GPUs by the types they may use
  bool too_many_sets_ = false;                       // past kMostTypeSets
  std::unordered_map<uint64_t, std::string> notes_;  // by type mask

  std::string Compose(uint64_t type_mask) const;
};

}  // namespace gantry
