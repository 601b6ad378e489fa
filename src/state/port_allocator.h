// The TCP ports each node lends to running jobs (a gang's MASTER_PORT, named ports such as
// a notebook's): from the node's range, never one port to two jobs at once, and a port
// given back goes to the end of the line, so a listener's TIME_WAIT has died down before
// the port is lent again.
#pragma once

#include <map>
#include <set>
#include <string>

#include "core/node.h"

namespace gantry {

class PortAllocator {
 public:
  // A free port of the node's range, now held; -1 when every port of the range is held.
  int Take(const Node& node);
  // A port held by a job that was already running (read back after a restart).
  void Hold(const std::string& node_id, int port);
  void Release(const std::string& node_id, int port);
  size_t Held(const std::string& node_id) const;

 private:
  std::map<std::string, std::set<int>> held_;  // by node id
  std::map<std::string, int> next_;            // where the next search starts
};

}  // namespace gantry
