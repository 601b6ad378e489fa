// Where an interactive session (exec, attach, a proxied port) goes: the checks a session
// in someone's running job needs, on the owner thread.
#include <fmt/format.h>

#include "state/controller_state.h"

namespace gantry {

Expected<StreamTarget> ControllerState::FindStreamTarget(const Actor& who, const std::string& id, StreamKind kind,
                                                         int rank, const std::string& port_name,
                                                         const std::string& action) {
  JobRecord* job = Find(id);
  if (!job || !who.SeesTeam(job->spec->team)) {
    return Refuse(who, action, id, {StatusCode::kNotFound, "no job " + id, "id"});
  }
  // The session runs as the job's account, with its files and GPUs: a teammate's job is
  // another person's account. Its team's admins (who answer for the team's jobs) and admins
  // may, each session audited.
  const bool team_admin = who.role == Role::kTeamAdmin && who.team == job->spec->team;
  if (!who.admin() && !team_admin && who.user != job->spec->user) {
    return Refuse(who, action, id,
                  Status::Denied("id", fmt::format("job {} is {}'s: only its owner, its team's admins or an admin "
                                                   "open a session in it",
                                                   id, job->spec->user)));
  }
  if (!job->spec->kube_pods.empty()) {
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("job {} is a Kubernetes pod: use kubectl exec, attach or "
                                                         "port-forward on it",
                                                         id)));
  }
  // An array's own id names all its tasks (gantry cancel 7): a session is in one of them.
  if (std::vector<JobRecord*> tasks = WholeArray(id); tasks.size() > 1) {
    return Refuse(who, action, id,
                  Status::Invalid("id", fmt::format("{} is an array of {} tasks: name one, as {}_{} (gantry jobs lists "
                                                    "them)",
                                                    id, tasks.size(), id, tasks.front()->array_task)));
  }
  if (IsTerminal(job->state)) {
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("job {} has ended ({}): gantry logs {} has its output", id,
                                                         ToString(job->state), id)));
  }
  if (job->state != JobState::kRunning || !running_pos_.count(job->spec->id)) {
    std::string hint =
        job->state == JobState::kPending ? fmt::format(" (gantry queue --explain {} says why it waits)", id) : "";
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("job {} is {}: a session needs a running job{}", id,
                                                         ToString(job->state), hint)));
  }
  const Placement& placement = RunningOf(job->spec->id).placement;
  StreamTarget t;
  t.job_id = job->spec->id;
  t.shown_id = job->array_id ? fmt::format("{}_{}", job->array_id, job->array_task) : job->spec->id;
  t.run = job->runs;
  t.owner = job->spec->user;
  t.team = job->spec->team;
  int node_index = -1;
  if (kind == StreamKind::kPort) {
    std::vector<std::string> names;
    for (const JobPort& p : job->ports) {
      if (p.name == "master") continue;
      names.push_back(p.name);
      if (p.name == port_name) {
        node_index = p.node;
        t.port = p.port;
      }
    }
    if (node_index < 0) {
      return Refuse(who, action, id,
                    Status::Invalid("port", names.empty() ? fmt::format("job {} has no named ports", id)
                                                          : fmt::format("job {} has no port named '{}' (it has: {})",
                                                                        id, port_name, fmt::join(names, ", "))));
    }
    for (size_t r = 0; r < placement.nodes.size(); ++r) {
      if (placement.nodes[r].node == node_index) t.node_rank = static_cast<int>(r);
    }
  } else {
    if (rank < 0 || rank >= static_cast<int>(placement.nodes.size())) {
      return Refuse(who, action, id,
                    Status::Invalid("rank", fmt::format("job {} runs on {} node(s): rank is 0..{}", id,
                                                        placement.nodes.size(), placement.nodes.size() - 1)));
    }
    node_index = placement.nodes[static_cast<size_t>(rank)].node;
    t.node_rank = rank;
  }
  t.node_id = snap_.nodes[static_cast<size_t>(node_index)].id;
  t.link = nodes_.Link(node_index);
  if (!t.link) {
    return Refuse(who, action, id,
                  Status::Precondition("id", fmt::format("node {} of job {} has no agent connected", t.node_id, id)));
  }
  return t;
}

}  // namespace gantry
