// The API's views of the controller's state, as JSON: a job, the job list, the queue with
// its reasons, the cluster, the nodes and their GPUs, the teams, budgets and alerts. A
// presenter: it reads the state (ControllerState lets it) and changes nothing but the
// state's cache of the explained plan. The Controller calls it on its thread, so each view
// sees one consistent state.
#include "state/state_views.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <sstream>

#include "billing/report.h"
#include "sched/apply_plan.h"
#include "sched/plan_output.h"
#include "sched/usage.h"
#include "state/node_json.h"

namespace gantry {

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The entries [offset, offset + limit) of `all` (limit 0: to the end).
nlohmann::json Page(nlohmann::json all, int offset, int limit) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = static_cast<size_t>(offset);
       i < all.size() && (limit <= 0 || out.size() < static_cast<size_t>(limit)); ++i) {
    out.push_back(std::move(all[i]));
  }
  return out;
}

}  // namespace

namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// "pending,running", "active" (pending, running, stopping), Slurm's "PENDING,RUNNING" or
// "PD,R"; empty: every state.
Expected<std::set<JobState>> StatesOf(const std::string& text) {
  static const std::map<std::string, std::vector<JobState>> kWords = {
      {"active", {JobState::kPending, JobState::kRunning, JobState::kStopping}},
      {"pd", {JobState::kPending}},
      {"r", {JobState::kRunning}},
      {"cg", {JobState::kStopping}},
      {"completing", {JobState::kStopping}},
      {"cd", {JobState::kSucceeded}},
      {"completed", {JobState::kSucceeded}},
      {"f", {JobState::kFailed}},
      {"ca", {JobState::kCancelled}},
      {"canceled", {JobState::kCancelled}}};
  std::set<JobState> out;
  for (std::string word : SplitList(text)) {
    word = Lower(word);
    JobState one = JobState::kPending;
    if (auto it = kWords.find(word); it != kWords.end()) {
      out.insert(it->second.begin(), it->second.end());
    } else if (ParseJobState(word, &one)) {
      out.insert(one);
    } else {
      return Status::Invalid("state", "unknown state '" + word.substr(0, 40) +
                                          "' (pending, running, stopping, succeeded, failed, cancelled, active, or "
                                          "several joined by ',')");
    }
  }
  return out;
}

}  // namespace

namespace {

void AddArrayIds(const JobRecord& job, nlohmann::json& e) {
  if (job.array_id == 0) return;
  e["array_job_id"] = std::to_string(job.array_id);
  e["array_task_id"] = job.array_task;
}

}  // namespace

namespace {

nlohmann::json SampleToJson(const GpuSample& s) {
  nlohmann::json processes = nlohmann::json::array();
  for (const GpuProcess& p : s.processes) {
    nlohmann::json proc = {{"pid", p.pid}, {"used_memory_mib", p.used_memory_mib}, {"job", p.job_id}};
    if (p.sm_util >= 0) proc["sm_util_pct"] = p.sm_util;
    if (p.gpu_instance >= 0) proc["gpu_instance"] = p.gpu_instance;
    processes.push_back(proc);
  }
  return {{"utilization_pct", s.util_pct},
          {"memory_utilization_pct", s.mem_util_pct},
          {"memory_used_mib", s.mem_used_mib},
          {"memory_total_mib", s.mem_total_mib},
          {"temperature_c", s.temperature_c},
          {"power_w", s.power_w},
          {"power_limit_w", s.power_limit_w},
          {"sm_clock_mhz", s.sm_clock_mhz},
          {"ecc_corrected_volatile", s.ecc_corrected},
          {"ecc_uncorrected_volatile", s.ecc_uncorrected},
          {"retired_pages", s.retired_pages},
          {"row_remap_pending", s.remap_pending},
          {"lost", s.lost},
          {"last_xid", s.last_xid},
          {"ecc_uncorrected_lifetime", s.ecc_uncorrected_lifetime},
          {"sm_active", s.sm_active},
          {"sm_occupancy", s.sm_occupancy},
          {"tensor_active", s.tensor_active},
          {"dram_active", s.dram_active},
          {"processes", processes}};
}

}  // namespace

Answer StateViews::GetJob(const Actor& who, const std::string& id) {
  JobRecord* job = s_.Find(id);
  if (!job || !who.SeesTeam(job->spec->team)) return Status(StatusCode::kNotFound, "no job " + id, "id");
  nlohmann::json r = s_.ApiView(*job, true);
  r["cost"] = RoundTo(s_.accounting_.JobCost(*job, s_.now_), 4);
  r["currency"] = s_.options_.pricing.currency;
  if (job->idle_flagged) r["idle"] = true;
  if (nlohmann::json use = s_.accounting_.JobUse(job->spec->id); !use.empty()) r["gpu_use"] = std::move(use);
  // An array's own id ("12", which is also its first task's): what the array is.
  if (job->array_id == job->seq && id.find('_') == std::string::npos && s_.arrays_.at(job->array_id).size() > 1) {
    r["array"] = s_.ArraySummary(job->array_id);
  }
  return r;
}

Answer StateViews::ListJobs(const Actor& who, const JobFilter& f) const {
  auto wanted = StatesOf(f.state);
  if (!wanted) return wanted.status();
  std::set<std::string> names;
  for (const std::string& name : SplitList(f.names)) names.insert(name);
  if (f.limit < 1 || f.limit > 10000) return Status::Invalid("limit", "must be within 1..10000");
  std::string search = Lower(f.search);
  nlohmann::json out = nlohmann::json::array();
  int matched = 0;
  for (auto it = s_.jobs_.rbegin(); it != s_.jobs_.rend(); ++it) {
    const JobRecord& job = it->second;
    const JobSpec& s = *job.spec;
    if (!who.SeesTeam(s.team)) continue;
    if (!wanted->empty() && !wanted->count(job.state)) continue;
    if (!names.empty() && !names.count(s.name)) continue;
    if (!f.team.empty() && s.team != f.team) continue;
    if (!f.user.empty() && s.user != f.user) continue;
    if (f.since_ms >= 0 && job.end_ms >= 0 && job.end_ms < f.since_ms) continue;
    if (f.until_ms >= 0 && job.submit_ms > f.until_ms) continue;
    if (!search.empty() && s.id != f.search && Lower(s.name).find(search) == std::string::npos &&
        Lower(s.user).find(search) == std::string::npos) {
      continue;
    }
    if (matched++ < f.offset || static_cast<int>(out.size()) >= f.limit) continue;
    out.push_back(s_.ApiView(job, false));
  }
  return nlohmann::json{{"jobs", out}, {"total", matched}, {"offset", f.offset}};
}

Answer StateViews::Queue(const Actor& who, const PageQuery& page) {
  const Plan& plan = s_.ExplainedPlan();
  TimeMs now = s_.now_;
  nlohmann::json out = nlohmann::json::array();
  int others = 0;
  for (const WaitingJob& w : plan.waiting) {
    const JobRecord* job = s_.Find(w.job_id);
    if (!job) continue;
    const JobSpec& s = *job->spec;
    if (!page.team.empty() && s.team != page.team) continue;
    // A user sees their team's jobs; the others only as the gaps in the positions and a count.
    if (!who.SeesTeam(s.team)) {
      ++others;
      continue;
    }
    nlohmann::json e = {{"position", w.position},
                        {"id", s.id},
                        {"team", s.team},
                        {"user", s.user},
                        {"name", s.name},
                        {"priority", s.priority_class},
                        {"gpus", JobGpuShare(s.request, s_.options_.config.catalog)},
                        {"sharing", ToString(s.request.sharing)},
                        {"waiting_s", (now - job->submit_ms) / 1000},
                        {"code", ToString(w.code)},
                        {"reason", plan.reason(w)}};
    if (std::string pool = s_.autoscaling_.WaitReason(s.id, now); !pool.empty()) {
      e["reason"] = plan.reason(w) + "; " + pool;
    }
    if (w.estimated_start_ms != kNever) e["estimated_start"] = FormatUtc(w.estimated_start_ms);
    AddArrayIds(*job, e);
    out.push_back(std::move(e));
  }
  nlohmann::json starting = nlohmann::json::array();
  for (const StartDecision& s : plan.starts) {
    const JobRecord* job = s_.Find(s.job_id);
    if (job && who.SeesTeam(job->spec->team)) starting.push_back(s.job_id);
  }
  // Held jobs, jobs waiting on a dependency and tasks over their array's limit are out of
  // the line until that changes.
  nlohmann::json blocked = nlohmann::json::array();
  JobGates gates(s_.JobTable());
  for (uint64_t seq : s_.kept_out_) {
    const JobRecord& job = s_.jobs_.at(seq);
    if (!who.SeesTeam(job.spec->team) || (!page.team.empty() && job.spec->team != page.team)) continue;
    GateBlocker b = gates.WhyKeptOut(job);
    nlohmann::json e = {{"id", job.spec->id},
                        {"team", job.spec->team},
                        {"user", job.spec->user},
                        {"name", job.spec->name},
                        {"priority", job.spec->priority_class},
                        {"code", b.code.empty() ? "queued_next_cycle" : b.code},
                        {"reason", b.code.empty() ? "queued at the next cycle" : b.reason}};
    if (!job.hold.empty()) e["held"] = job.hold;
    AddArrayIds(job, e);
    blocked.push_back(std::move(e));
  }
  size_t total = out.size(), total_blocked = blocked.size();
  return nlohmann::json{{"queue", Page(std::move(out), page.offset, page.limit)},
                        {"total", total},
                        {"other_teams_waiting", others},
                        {"starting_next_cycle", starting},
                        {"blocked", Page(std::move(blocked), page.offset, page.limit)},
                        {"total_blocked", total_blocked}};
}

Answer StateViews::Cluster() const {
  ClusterStatus st = ComputeStatus(s_.snap_, s_.options_.config.catalog);
  nlohmann::json body = StatusToJson(st);
  std::map<std::string, double> by_team;
  for (const RunningJob& r : s_.snap_.running) {
    by_team[r.spec->team] += PlacementShare(r.placement, r.spec->request.sharing);
  }
  body["allocated_by_team"] = by_team;
  return body;
}

Answer StateViews::Nodes(const Actor& who, const PageQuery& page) const {
  // Per node and GPU: the running jobs on it, each with its share of it.
  std::vector<std::map<int, std::vector<std::pair<const RunningJob*, const GpuShare*>>>> on(s_.snap_.nodes.size());
  for (const RunningJob& r : s_.snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      for (const GpuShare& g : ns.gpus) on[ns.node][g.gpu].emplace_back(&r, &g);
    }
  }
  const GpuCatalog& catalog = s_.options_.config.catalog;
  nlohmann::json out = nlohmann::json::array();
  const int64_t count = static_cast<int64_t>(s_.snap_.nodes.size());  // offset + limit in 64 bits: no overflow
  const int end =
      static_cast<int>(page.limit > 0 ? std::min<int64_t>(int64_t{page.offset} + page.limit, count) : count);
  for (int n = page.offset; n < end; ++n) {
    nlohmann::json doc = NodeToDoc(s_.snap_.nodes[n], catalog);
    doc["gpu_type"] = catalog.Get(s_.snap_.nodes[n].gpu_type()).name;
    doc["agent_connected"] = s_.nodes_.Link(static_cast<int>(n)) != nullptr;
    for (auto& g : doc["gpus"]) {
      int index = g["index"].get<int>();
      // Another team's jobs are a share of the GPU without a name (users see their team).
      nlohmann::json ids = nlohmann::json::array(), parts = nlohmann::json::array();
      for (const auto& [job, share] : on[n][index]) {
        const JobSpec& spec = *job->spec;
        bool visible = who.SeesTeam(spec.team);
        if (visible) ids.push_back(spec.id);
        nlohmann::json p = {{"share", GpuShareOf(*share, spec.request.sharing)},
                            {"sharing", ToString(HeldSharing(spec, job->placement))}};
        if (visible) p.update({{"job", spec.id}, {"team", spec.team}, {"user", spec.user}});
        if (share->mig_profile >= 0) p["mig_profile"] = share->mig_profile;
        parts.push_back(std::move(p));
      }
      g["jobs"] = ids;
      g["shares"] = parts;
      if (page.telemetry) {
        if (const NodeTable::Reading* reading = s_.nodes_.ReadingOf(static_cast<int>(n), index)) {
          const auto& [sample, at] = *reading;
          g["telemetry"] = {{"utilization_pct", sample.util_pct},
                            {"memory_used_mib", sample.mem_used_mib},
                            {"memory_total_mib", sample.mem_total_mib},
                            {"temperature_c", sample.temperature_c},
                            {"power_w", sample.power_w},
                            {"age_s", static_cast<double>(s_.now_ - at) / 1000.0}};
        }
      }
    }
    out.push_back(std::move(doc));
  }
  return nlohmann::json{{"nodes", out}, {"total", s_.snap_.nodes.size()}, {"offset", page.offset}};
}

Answer StateViews::NodeGpus(const Actor& who, const std::string& node_id) const {
  int n = s_.nodes_.IndexOf(node_id);
  if (n < 0) return Status(StatusCode::kNotFound, "no node " + node_id, "node");
  const Node& node = s_.snap_.nodes[n];
  std::map<int, std::vector<std::string>> jobs;
  for (const RunningJob& r : s_.snap_.running) {
    for (const NodeShare& ns : r.placement.nodes) {
      for (const GpuShare& g : ns.gpus) {
        if (ns.node == n && who.SeesTeam(r.spec->team)) jobs[g.gpu].push_back(r.spec->id);
      }
    }
  }
  nlohmann::json gpus = nlohmann::json::array();
  TimeMs now = s_.now_;
  for (const Gpu& g : node.gpus) {
    nlohmann::json j = {{"index", g.index},
                        {"uuid", g.uuid},
                        {"type", s_.options_.config.catalog.Get(g.type).name},
                        {"healthy", g.health == GpuHealth::kHealthy},
                        {"fenced", g.fenced},
                        {"jobs", jobs[g.index]}};
    if (const NodeTable::Reading* reading = s_.nodes_.ReadingOf(n, g.index)) {
      const auto& [sample, at] = *reading;
      j["telemetry"] = SampleToJson(sample);
      j["telemetry"]["age_s"] = static_cast<double>(now - at) / 1000.0;
      for (auto& proc : j["telemetry"]["processes"]) {  // users see their own team's jobs only
        const JobRecord* job = s_.Find(proc.value("job", ""));
        if (job && !who.SeesTeam(job->spec->team)) proc["job"] = "";
      }
    }
    gpus.push_back(std::move(j));
  }
  return nlohmann::json{{"node", node_id}, {"gpus", gpus}};
}

Answer StateViews::Teams(const Actor& who) const {
  struct Seen {
    double allocated = 0;
    int running = 0, pending = 0, blocked = 0;
    double pending_gpus = 0;
  };
  std::map<std::string, Seen> teams;
  for (const auto& [name, quota] : s_.quotas_->teams) teams[name];
  const GpuCatalog& catalog = s_.options_.config.catalog;
  for (const RunningJob& r : s_.snap_.running) {
    Seen& t = teams[r.spec->team];
    t.allocated += PlacementShare(r.placement, r.spec->request.sharing);
    t.running++;
  }
  for (const PendingJob& p : s_.snap_.pending) {
    Seen& t = teams[p.spec->team];
    t.pending++;
    t.pending_gpus += JobGpuShare(p.spec->request, catalog);
  }
  for (uint64_t seq : s_.kept_out_) teams[s_.jobs_.at(seq).spec->team].blocked++;
  auto limit = [](double v) { return v == kUnlimited ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, t] : teams) {
    if (!who.SeesTeam(name)) continue;
    const TeamQuota& q = s_.quotas_->Team(name);
    // An unlisted team with work has its equal share of what listed guarantees leave.
    const bool has_work = t.running + t.pending > 0;
    out.push_back(
        {{"team", name},
         {"listed", s_.quotas_->teams.count(name) > 0},
         {"guaranteed_gpus", has_work ? s_.quotas_->GuaranteeOf(name, s_.snap_.equal_share) : q.guaranteed_total()},
         {"max_gpus", limit(q.ceiling())},
         {"weight", q.weight},
         {"allocated_gpus", t.allocated},
         {"running_jobs", t.running},
         {"pending_jobs", t.pending},
         {"pending_gpus", t.pending_gpus},
         {"blocked_jobs", t.blocked}});
  }
  return nlohmann::json{{"teams", out}};
}

Answer StateViews::Budgets(const Actor& who) const {
  nlohmann::json out = nlohmann::json::array();
  for (auto& b : s_.BudgetStatus()) {
    if (who.admin() || b["team"] == who.team) out.push_back(std::move(b));
  }
  return nlohmann::json{
      {"month", s_.accounting_.month()}, {"currency", s_.options_.pricing.currency}, {"budgets", out}};
}

nlohmann::json StateViews::Alerts(const Actor& who) const {
  nlohmann::json out = nlohmann::json::array();
  const nlohmann::json& alerts = s_.accounting_.alerts();
  for (auto it = alerts.rbegin(); it != alerts.rend(); ++it) {
    if (who.admin() || (*it)["team"] == who.team) out.push_back(*it);
  }
  return out;
}

nlohmann::json StateViews::Changed(const JobsChanged& changed) const {
  nlohmann::json view = s_.ApiView(*s_.Find(changed.id), true);
  if (changed.tasks.empty()) return view;
  std::map<std::string, int> states;
  for (const std::string& id : changed.tasks) states[ToString(s_.Find(id)->state)]++;
  view["acted_on"] = {
      {"named", changed.named}, {"tasks", changed.tasks.size()}, {"changed", changed.changed}, {"states", states}};
  return view;
}

nlohmann::json StateViews::OneNode(const std::string& node_id) const {
  return NodeToDoc(s_.snap_.nodes[s_.nodes_.IndexOf(node_id)], s_.options_.config.catalog);
}

}  // namespace gantry
