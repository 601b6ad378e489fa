// The controller's own facts about each node, beside what the engine sees of it (the
// Snapshot's Node at the same index): which index an id has, the link its orders go to
// (none while its agent is away), when its agent was last heard, the latest reading of each
// of its GPUs, whether its cloud has sent a reclaim notice, and the GPUs held back after
// an MPS fault. Indexes only grow: a node that leaves keeps its index (and comes back to it).
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/time.h"
#include "protocol/gpu_readings.h"
#include "protocol/node_link.h"

namespace gantry {

class NodeTable {
 public:
  // A GPU's latest reading and when it came.
  struct Reading {
    GpuSample sample;
    TimeMs at = 0;
  };

  // A new node's index (the next one), heard from at `now`.
  int Add(const std::string& id, NodeLink* link, TimeMs now);
  // The node's index, or -1.
  int IndexOf(const std::string& id) const;
  bool Knows(const std::string& id) const { return index_.count(id) > 0; }
  size_t size() const { return links_.size(); }

  // Where its orders go; null while no agent serves it.
  NodeLink* Link(int n) const { return links_[static_cast<size_t>(n)]; }
  // Its agent (re)connected through `link`: GPU readings by index are forgotten (the
  // indexes may mean other GPUs now).
  void Attach(int n, NodeLink* link);
  // Its agent is gone (lost, or the node left its pool): no link, no readings, no notice.
  void Detach(int n);
  void Heard(int n, TimeMs now) { last_heard_[static_cast<size_t>(n)] = now; }
  TimeMs LastHeard(int n) const { return last_heard_[static_cast<size_t>(n)]; }

  void Record(int n, int gpu, GpuSample sample, TimeMs at) { readings_[n][gpu] = {std::move(sample), at}; }
  // The GPU's latest reading, or null.
  const Reading* ReadingOf(int n, int gpu) const;
  // Every node's readings: node index -> GPU index -> reading.
  const std::map<int, std::map<int, Reading>>& readings() const { return readings_; }

  // A reclaim notice: true when it is the node's first.
  bool NoteReclaim(int n) { return reclaiming_.insert(n).second; }
  bool Reclaiming(int n) const { return reclaiming_.count(n) > 0; }
  void ForgetReclaim(int n) { reclaiming_.erase(n); }

  // GPUs held back after an MPS fault, as (node index, GPU index).
  std::set<std::pair<int, int>>& mps_fault_holds() { return mps_fault_holds_; }

 private:
  std::unordered_map<std::string, int> index_;
  std::vector<NodeLink*> links_;
  std::vector<TimeMs> last_heard_;
  std::map<int, std::map<int, Reading>> readings_;
  std::set<int> reclaiming_;
  std::set<std::pair<int, int>> mps_fault_holds_;
};

}  // namespace gantry
