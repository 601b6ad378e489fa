// Port lending per node.
#include "state/port_allocator.h"

namespace gantry {

int PortAllocator::Take(const Node& node) {
  const NodeNetwork& n = node.network;
  std::set<int>& held = held_[node.id];
  int size = n.port_last - n.port_first + 1;
  int& next = next_[node.id];
  if (next < n.port_first || next > n.port_last) next = n.port_first;
  for (int tried = 0; tried < size; ++tried) {
    int port = next;
    next = next == n.port_last ? n.port_first : next + 1;
    if (held.insert(port).second) return port;
  }
  return -1;
}

void PortAllocator::Hold(const std::string& node_id, int port) { held_[node_id].insert(port); }

void PortAllocator::Release(const std::string& node_id, int port) {
  auto it = held_.find(node_id);
  if (it != held_.end()) it->second.erase(port);
}

size_t PortAllocator::Held(const std::string& node_id) const {
  auto it = held_.find(node_id);
  return it == held_.end() ? 0 : it->second.size();
}

}  // namespace gantry
