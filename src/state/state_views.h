// The API's views of the controller's state: what GET /v1/jobs, /v1/jobs/ID, /v1/queue,
// /v1/cluster, /v1/nodes, /v1/nodes/ID/gpus, /v1/teams, /v1/budgets and /v1/alerts answer,
// and what a change to jobs or nodes answers, as JSON, for the caller (users see their
// own team's jobs by name, others' only as counts or shares). A presenter over
// ControllerState: the state machine keeps the jobs and their indexes, this turns them
// into answers. Used on the Controller's thread (its posts), so each view sees one
// consistent state.
#pragma once

#include <string>

#include "state/controller_state.h"

namespace gantry {

class StateViews {
 public:
  // Non-const: the queue's view fills the state's cache of the explained plan.
  explicit StateViews(ControllerState& state) : s_(state) {}

  Answer GetJob(const Actor& who, const std::string& id);
  Answer ListJobs(const Actor& who, const JobFilter& filter) const;
  // The waiting jobs in order with why each waits and its estimated start, the jobs
  // starting at the next cycle, and the jobs kept out of the line (held, a dependency, an
  // array's limit) with why.
  Answer Queue(const Actor& who, const PageQuery& page = {});
  Answer Cluster() const;
  Answer Nodes(const Actor& who, const PageQuery& page = {}) const;
  Answer NodeGpus(const Actor& who, const std::string& node_id) const;
  // Each team's jobs and GPUs against its guarantee and limits (users: their own team).
  Answer Teams(const Actor& who) const;
  Answer Budgets(const Actor& who) const;
  // The alerts the caller may see, newest first.
  nlohmann::json Alerts(const Actor& who) const;
  // The answer of a change to jobs (cancel, hold, release, update, checkpoint-done): the
  // named job's view and, when the name stood for several tasks, acted_on: {named, tasks,
  // changed, states}.
  nlohmann::json Changed(const JobsChanged& changed) const;
  // One node as GET /v1/nodes lists it (a drain's answer).
  nlohmann::json OneNode(const std::string& node_id) const;

 private:
  ControllerState& s_;
};

}  // namespace gantry
