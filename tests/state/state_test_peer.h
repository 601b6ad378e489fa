// Reaches into the controller state's indexes, for tests that break one on purpose
// (CheckInvariants must find it; the server must end rather than commit it).
#pragma once

#include <set>
#include <string>
#include <unordered_map>

#include "state/controller_state.h"

namespace gantry {

struct ControllerStateTestPeer {
  static std::set<uint64_t>& KeptOut(ControllerState& s) { return s.kept_out_; }
  static Snapshot& Snap(ControllerState& s) { return s.snap_; }
  static std::unordered_map<std::string, int>& WaitingByTeam(ControllerState& s) { return s.waiting_by_team_; }
  static std::unordered_map<std::string, std::set<std::string>>& RunningNodes(ControllerState& s) {
    return s.running_nodes_;
  }
  static PortAllocator& Ports(ControllerState& s) { return s.ports_; }
};

}  // namespace gantry
