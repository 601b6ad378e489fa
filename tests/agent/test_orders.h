// Start orders for tests of the node side: job `id` of ana (team vision) on node n1, one
// whole GPU, running `command` (empty: a job that only holds its GPU).
#pragma once

#include <memory>
#include <string>

#include "protocol/messages.h"

namespace gantry::testing {

inline StartOrder TestOrder(const std::string& id, const std::string& command = "python3 train.py",
                            const std::string& user = "ana") {
  JobSpec spec;
  spec.id = id;
  spec.name = id;
  spec.user = user;
  spec.team = "vision";
  spec.command = command;
  StartOrder o;
  o.job_id = id;
  o.spec = std::make_shared<const JobSpec>(spec);
  o.node_id = o.leader_node = "n1";
  o.gpus.push_back({0, "GPU-aaa", "", 1000, 0, 0, "", -1});
  return o;
}

}  // namespace gantry::testing
