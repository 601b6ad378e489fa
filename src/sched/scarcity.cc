// Type scarcity for the queue's reasons (scarcity.h).
#include "sched/scarcity.h"

#include <fmt/format.h>

#include <cmath>

namespace gantry {

void TypeScarcity::AddWaiting(uint64_t type_mask, double gpus) {
  if (type_mask == 0 || too_many_sets_) return;
  waiting_[type_mask] += gpus;
  too_many_sets_ = waiting_.size() > kMostTypeSets;
}

const std::string& TypeScarcity::Note(uint64_t type_mask) {
  auto [note, added] = notes_.try_emplace(type_mask);
  if (added && notes_.size() <= kMostNotes) note->second = Compose(type_mask);
  return note->second;
}

std::string TypeScarcity::Compose(uint64_t type_mask) const {
  if (type_mask == 0 || too_many_sets_) return "";
  double capacity = 0, demand = 0;
  std::string names;
  int types = 0;
  for (size_t type = 0; type < capacity_.size() && type < 64; ++type) {
    if (!(type_mask >> type & 1) || capacity_[type] <= 0) continue;
    capacity += capacity_[type];
    demand += type < running_.size() ? running_[type] : 0;
    names += (names.empty() ? "" : " or ") + catalog_.Get(static_cast<GpuTypeId>(type)).name;
    ++types;
  }
  for (const auto& [mask, gpus] : waiting_) {
    if ((mask & ~type_mask) == 0) demand += gpus;
  }
  if (capacity <= 0 || demand <= capacity + 1e-9) return "";
  return fmt::format(
      "{} {} scarcer than {} demand: {} GPUs in the cluster, {} asked by running and waiting jobs that can use no "
      "other type",
      names, types > 1 ? "are" : "is", types > 1 ? "their" : "its", capacity, std::ceil(demand - 1e-9));
}

}  // namespace gantry
