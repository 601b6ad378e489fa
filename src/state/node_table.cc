// The controller's table of nodes: ids to indexes, links, last heard, readings, notices.
#include "state/node_table.h"

namespace gantry {

int NodeTable::Add(const std::string& id, NodeLink* link, TimeMs now) {
  int n = static_cast<int>(links_.size());
  index_[id] = n;
  links_.push_back(link);
  last_heard_.push_back(now);
  return n;
}

int NodeTable::IndexOf(const std::string& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

void NodeTable::Attach(int n, NodeLink* link) {
  links_[static_cast<size_t>(n)] = link;
  readings_.erase(n);
}

void NodeTable::Detach(int n) {
  links_[static_cast<size_t>(n)] = nullptr;
  readings_.erase(n);
  reclaiming_.erase(n);
}

const NodeTable::Reading* NodeTable::ReadingOf(int n, int gpu) const {
  auto node = readings_.find(n);
  if (node == readings_.end()) return nullptr;
  auto it = node->second.find(gpu);
  return it == node->second.end() ? nullptr : &it->second;
}

}  // namespace gantry
