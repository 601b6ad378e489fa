// The controller's calls: each request or node report is posted to the owner thread and
// applied to the state machine; a request returns once the batch it was in is durable,
// a report returns at once. The calls that read history (events, audit, a node's
// history) read the store on the caller's thread. Requests that only read go as views
// (View): a bug in one answers 500; any other post is a change (Call), and a bug half-way
// through one ends the process rather than commit half of it (controller.cc).
#include "core/encoding.h"
#include "server/controller.h"
#include "state/history.h"
#include "state/state_views.h"

namespace gantry {

Expected<Submitted> Controller::Submit(const Actor& who, JobSpec spec, const std::string& idempotency_key) {
  // The request hash covers the spec as submitted, so a retry with another body is caught.
  std::string hash = idempotency_key.empty() ? "" : Sha256Hex(SpecToJson(spec).dump(-1, ' ', false, kReplaceBadUtf8));
  std::optional<Expected<Submitted>> result;
  // The reply is built after the batch's scheduling cycle: a job that started at once says so.
  Enqueue([&] { result.emplace(state_.Submit(who, std::move(spec), idempotency_key, hash)); },
          [&] {
            if (!result->ok() || !(*result)->created) return;
            Submitted& s = result->value();
            s.job = state_.JobView(s.job["id"].get<std::string>());
          })
      .get();
  return std::move(*result);
}

Expected<Submitted> Controller::SubmitBatch(const Actor& who, std::vector<JobSpec> specs,
                                            const std::string& idempotency_key) {
  std::string hash;
  if (!idempotency_key.empty()) {
    nlohmann::json all = nlohmann::json::array();
    for (const JobSpec& spec : specs) all.push_back(SpecToJson(spec));
    hash = Sha256Hex(all.dump(-1, ' ', false, kReplaceBadUtf8));
  }
  std::optional<Expected<Submitted>> result;
  Enqueue([&] { result.emplace(state_.SubmitBatch(who, std::move(specs), idempotency_key, hash, true)); },
          [&] {
            if (!result->ok() || !(*result)->created) return;
            Submitted& s = result->value();
            s.job = state_.SubmittedView(s.job["ids"].get<std::vector<std::string>>(), true);
          })
      .get();
  return std::move(*result);
}

Answer Controller::DryRun(const Actor& who, std::vector<Expected<JobSpec>> specs) {
  return View([&]() -> Answer { return state_.DryRun(who, std::move(specs)); });
}

Answer Controller::Cancel(const Actor& who, const std::string& id) {
  return Call([&] { return ChangedView(state_.Cancel(who, id)); });
}

Answer Controller::CheckpointDone(const Actor& who, const std::string& id) {
  return Call([&] { return ChangedView(state_.CheckpointDone(who, id)); });
}

Answer Controller::Hold(const Actor& who, const std::string& id) {
  return Call([&] { return ChangedView(state_.Hold(who, id)); });
}

Answer Controller::Release(const Actor& who, const std::string& id) {
  return Call([&] { return ChangedView(state_.Release(who, id)); });
}

Answer Controller::Update(const Actor& who, const std::string& id, const JobChanges& changes) {
  return Call([&] { return ChangedView(state_.Update(who, id, changes)); });
}

Answer Controller::ChangedView(const Expected<JobsChanged>& changed) {
  if (!changed) return changed.status();
  return StateViews(state_).Changed(*changed);
}

Answer Controller::GetJob(const Actor& who, const std::string& id) {
  return View([&] { return StateViews(state_).GetJob(who, id); });
}

Expected<StreamTarget> Controller::FindStreamTarget(const Actor& who, const std::string& id, StreamKind kind, int rank,
                                                    const std::string& port_name, const std::string& action) {
  return Call([&] { return state_.FindStreamTarget(who, id, kind, rank, port_name, action); });
}

Answer Controller::ListJobs(const Actor& who, const JobFilter& filter) {
  return View([&] { return StateViews(state_).ListJobs(who, filter); });
}

Answer Controller::Queue(const Actor& who, const PageQuery& page) {
  return View([&] { return StateViews(state_).Queue(who, page); });
}

Answer Controller::Cluster() {
  return View([&] { return StateViews(state_).Cluster(); });
}

Answer Controller::Nodes(const Actor& who, const PageQuery& page) {
  return View([&] { return StateViews(state_).Nodes(who, page); });
}

Answer Controller::Pools() {
  return View([&] { return state_.Pools(); });
}

Answer Controller::Teams(const Actor& who) {
  return View([&] { return StateViews(state_).Teams(who); });
}

Answer Controller::History(const std::string& range) {
  auto r = ParseHistoryRange(range, Now());
  if (!r) return r.status();
  auto rows = store_->History(r->from, r->to);
  if (!rows) return rows.status();
  return HistorySeries(*rows, *r);
}

Answer Controller::SetDrain(const Actor& who, const std::string& node, int gpu, bool drain) {
  return Call([&]() -> Answer {
    Status s = state_.SetDrain(who, node, gpu, drain);
    if (!s.ok()) return s;
    return StateViews(state_).OneNode(node);
  });
}

void Controller::ApplyKubeNode(const std::string& node_id, const KubeNodeFacts& facts) {
  Call([&] {
    state_.ApplyKubeNode(node_id, facts);
    return 0;
  });
}

void Controller::ApplyKubeNodes(const std::vector<std::pair<std::string, KubeNodeFacts>>& nodes) {
  Call([&] {
    state_.ApplyKubeNodes(nodes);
    return 0;
  });
}

void Controller::SetPodLink(NodeLink* link) {
  Call([&] {
    state_.SetPodLink(link);
    return 0;
  });
}

void Controller::ApplyKubePod(WatchedPod pod) {
  Enqueue([this, pod = std::move(pod)] { state_.ApplyKubePod(pod); });
}

void Controller::ApplyKubePods(const std::vector<WatchedPod>& pods) {
  Call([&] {
    state_.ApplyKubePods(pods);
    return 0;
  });
}

std::vector<KubePodWait> Controller::KubePodWaits() {
  return View([&] { return state_.KubePodWaits(); });
}

Answer Controller::NodeGpus(const Actor& who, const std::string& node_id) {
  return View([&] { return StateViews(state_).NodeGpus(who, node_id); });
}

Answer Controller::Budgets(const Actor& who) {
  return View([&] { return StateViews(state_).Budgets(who); });
}

Answer Controller::Alerts(const Actor& who) {
  nlohmann::json alerts = View([&] { return StateViews(state_).Alerts(who); });
  return nlohmann::json{
      {"alerts", std::move(alerts)}, {"webhooks_sent", notifier_.sent()}, {"webhooks_failed", notifier_.failed()}};
}

std::string Controller::MetaValue(const std::string& key) {
  return View([&] { return state_.MetaValue(key); });
}

void Controller::SetMetaValue(const std::string& key, const std::string& value) {
  Call([&] {
    state_.SetMetaValue(key, value);
    return 0;
  });
}

void Controller::RecordAudit(const Actor& who, const std::string& action, const std::string& target,
                             const std::string& outcome, const std::string& detail) {
  Enqueue([=, this] { state_.Audit(who, action, target, outcome, detail); });
}

void Controller::RunStarted(const RunReport& started) {
  Enqueue([this, started] { state_.RunStarted(started); });
}

void Controller::RunExited(const RunReport& exited) {
  Enqueue([this, exited] { state_.RunExited(exited); });
}

void Controller::MigChanged(const MigReport& change) {
  Enqueue([this, change] { state_.MigChanged(change); });
}

void Controller::Readings(NodeReadings readings) {
  Enqueue([this, readings = std::move(readings)]() mutable { state_.Readings(std::move(readings)); });
}

void Controller::GpuHealth(const GpuHealthChange& change) {
  Enqueue([this, change] { state_.GpuHealth(change); });
}

Status Controller::AdmitPoolNode(const std::string& pool, const Node& node) {
  return View([&] { return state_.AdmitPoolNode(pool, node); });
}

void Controller::Reclaim(const NodeNotice& notice) {
  Enqueue([this, notice] { state_.Reclaim(notice); });
}

void Controller::Heartbeat(const std::string& node_id) {
  Enqueue([this, node_id] { state_.Heartbeat(node_id); });
}

std::string Controller::Metrics() {
  MetricsWriter w;
  View([&] {
    state_.WriteMetrics(w);
    w.Family("gantry_webhooks_total", "counter", "Webhooks (alerts, job notifications) by outcome");
    w.Sample("gantry_webhooks_total", {{"outcome", "sent"}}, static_cast<double>(notifier_.sent()));
    w.Sample("gantry_webhooks_total", {{"outcome", "failed"}}, static_cast<double>(notifier_.failed()));
    w.Family("gantry_mails_total", "counter", "Job notification mails by outcome");
    w.Sample("gantry_mails_total", {{"outcome", "sent"}}, static_cast<double>(notifier_.mails_sent()));
    w.Sample("gantry_mails_total", {{"outcome", "failed"}}, static_cast<double>(notifier_.mails_failed()));
    w.Write("gantry_scheduling_cycle_seconds", "Time of one scheduling cycle", cycle_seconds_);
    state_.WriteLatencyMetrics(w);
    WriteLeadershipMetrics(w, true, options_.leader_term, options_.leader_takeovers);
    return 0;
  });
  std::lock_guard<std::mutex> lock(commit_metrics_mu_);
  w.Write("gantry_store_commit_seconds", "Time of one group commit", commit_seconds_);
  return std::move(w).str();
}

Answer Controller::Events(const Actor& who, const std::string& id) {
  Answer visible = GetJob(who, id);
  if (!visible) return visible;
  auto events = store_->Events(visible->value("id", id));  // "12_4" names the task's own job
  if (!events) return events.status();
  nlohmann::json out = nlohmann::json::array();
  for (const JobEvent& e : *events) {
    out.push_back({{"at", FormatUtc(e.ts_ms)},
                   {"at_ms", e.ts_ms},
                   {"kind", e.kind},
                   {"detail", nlohmann::json::parse(e.detail, nullptr, false)}});
  }
  return nlohmann::json{{"events", out}};
}

Answer Controller::AuditLog(const Actor& who, int limit) {
  if (!who.admin()) return Status::Denied("", "only admins read the audit log");
  if (limit < 1 || limit > 10000) return Status::Invalid("limit", "must be within 1..10000");
  Sync();  // what was acknowledged before is in the store
  auto records = store_->Audit(limit);
  if (!records) return records.status();
  nlohmann::json out = nlohmann::json::array();
  for (const AuditRecord& a : *records) {
    out.push_back({{"at", FormatUtc(a.ts_ms)},
                   {"user", a.user},
                   {"role", a.role},
                   {"action", a.action},
                   {"target", a.target},
                   {"outcome", a.outcome},
                   {"detail", a.detail}});
  }
  return nlohmann::json{{"audit", out}};
}

Answer Controller::NodeHistory(const Actor& who, const std::string& node_id, int limit) {
  bool known = View([&] { return state_.KnowsNode(node_id); });
  if (!known) return Status(StatusCode::kNotFound, "no node " + node_id, "node");
  auto events = store_->NodeEvents(node_id, limit);
  if (!events) return events.status();
  nlohmann::json out = nlohmann::json::array();
  std::set<std::string> jobs;  // the jobs the events name (a MIG change's)
  for (const auto& e : *events) {
    nlohmann::json detail = nlohmann::json::parse(e.detail, nullptr, false);
    if (detail.is_object() && detail.contains("job") && detail["job"].is_string()) jobs.insert(detail["job"]);
    out.push_back({{"at", FormatUtc(e.ts_ms)}, {"kind", e.kind}, {"detail", std::move(detail)}});
  }
  if (who.admin() || jobs.empty()) return nlohmann::json{{"events", out}};
  // Another team's job is not named to a user, nor is what went wrong with it.
  std::set<std::string> hidden = View([&] {
    std::set<std::string> others;
    for (const std::string& id : jobs) {
      if (!StateViews(state_).GetJob(who, id).ok()) others.insert(id);
    }
    return others;
  });
  for (nlohmann::json& e : out) {
    nlohmann::json& detail = e["detail"];
    if (detail.is_object() && detail.contains("job") && detail["job"].is_string() && hidden.count(detail["job"])) {
      detail.erase("job");
      detail.erase("error");
    }
  }
  return nlohmann::json{{"events", out}};
}

}  // namespace gantry
