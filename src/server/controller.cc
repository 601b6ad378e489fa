// The controller's thread, its group commit, recovery from the store and node attachment.
// Job transitions and the scheduling cycle are in controller_jobs.cc; read-only views in
// controller_views.cc.
#include "server/controller.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdio>

#include "core/clock.h"
#include "server/node_json.h"

namespace gantry {

Controller::Controller(ControllerOptions options, std::unique_ptr<Store> store)
    : options_(std::move(options)),
      store_(std::move(store)),
      ledger_(options_.config.scheduler.fairshare_half_life_ms) {
  quotas_ = std::make_shared<const QuotaConfig>(options_.config.quotas);
  if (!options_.quotas_path.empty()) {
    const GpuCatalog* catalog = &options_.config.catalog;
    quota_file_ = std::make_unique<ReloadableFile<QuotaConfig>>(
        options_.quotas_path, [catalog](const std::string& path) { return QuotaConfig::LoadFile(path, *catalog); });
    if (quota_file_->Refresh().ok()) quotas_ = quota_file_->current();
  }
  engine_ = std::make_unique<Engine>(options_.config.catalog, options_.config.scheduler, quotas_.get());
}

Controller::~Controller() { Stop(); }

TimeMs Controller::Now() const { return options_.now ? options_.now() : WallClock().NowMs(); }

Status Controller::Recover() {
  auto stored = store_->Load();
  if (!stored) return stored.status();
  meta_ = stored->meta;
  for (const auto& [id, doc] : stored->nodes) {
    auto node = NodeFromDoc(nlohmann::json::parse(doc, nullptr, false), options_.config.catalog);
    if (!node) return Status::Internal(fmt::format("stored node {}: {}", id, node.status().ToString()));
    node_index_[node->id] = static_cast<int>(snap_.nodes.size());
    snap_.nodes.push_back(std::move(*node));
    node_link_.push_back(nullptr);
    last_seen_.push_back(Now());
  }
  auto index_of = [this](const std::string& id) {
    auto it = node_index_.find(id);
    return it == node_index_.end() ? -1 : it->second;
  };
  for (const StoredJob& row : stored->jobs) {
    auto job = JobFromDoc(nlohmann::json::parse(row.doc, nullptr, false), index_of);
    if (!job) return job.status();
    next_seq_ = std::max(next_seq_, job->seq + 1);
    const std::string& id = job->spec->id;
    if (job->state == JobState::kPending) {
      PendingJob p{job->spec, job->submit_ms, job->attained_gpu_ms, job->evictions, job->nominated};
      snap_.pending.push_back(std::move(p));
      pending_running_[id] = job->seq;
    } else if (job->state == JobState::kRunning || job->state == JobState::kStopping) {
      RunningJob r{job->spec, job->start_ms, job->placement, job->submit_ms};
      r.evictions = job->evictions;
      r.attained_gpu_ms = job->attained_gpu_ms;
      r.stop_at_ms = job->stop_at_ms;
      running_pos_[id] = static_cast<int>(snap_.running.size());
      running_nodes_[id] = static_cast<int>(job->placement.nodes.size());
      snap_.running.push_back(std::move(r));
      pending_running_[id] = job->seq;
    }
    jobs_.emplace(job->seq, std::move(*job));
  }
  for (const IdempotencyRecord& r : stored->idempotency) {
    idempotency_[r.user + "\n" + r.key] = {r.job_id, r.request_hash};
  }
  return RecoverAccounting();
}

Status Controller::AttachNodes(const std::vector<Node>& nodes, NodeLink* link, const std::vector<RunReport>& runs) {
  for (const Node& n : nodes) {
    if (Status s = ValidateNode(n, options_.config.catalog); !s.ok()) return s;
  }
  auto attach = [&]() -> Status {
    for (const Node& n : nodes) {
      auto it = node_index_.find(n.id);
      if (it == node_index_.end()) {
        node_index_[n.id] = static_cast<int>(snap_.nodes.size());
        snap_.nodes.push_back(n);
        node_link_.push_back(link);
        last_seen_.push_back(Now());
        PersistNode(static_cast<int>(snap_.nodes.size()) - 1);
        NodeEvent(n.id, "registered", {{"gpus", n.gpus.size()}});
        continue;
      }
      // Known node: the inventory comes from the agent, the admin's drains from the store.
      Node& known = snap_.nodes[it->second];
      NodeLink* serving = node_link_[it->second];
      if (serving && serving != link && !serving->remote()) {
        return Status::Denied("node_id", fmt::format("node {} is this server's own (standalone) node", n.id));
      }
      // Runs on GPUs the node no longer has (fewer GPUs, another card or model at an
      // index) end as after a fault, before the node's GPU list changes under them.
      std::vector<std::string> stranded;
      for (const RunningJob& r : snap_.running) {
        for (const NodeShare& ns : r.placement.nodes) {
          if (ns.node != it->second) continue;
          for (const GpuShare& g : ns.gpus) {
            bool kept = g.gpu < static_cast<int>(n.gpus.size()) && n.gpus[g.gpu].uuid == known.gpus[g.gpu].uuid &&
                        n.gpu_type() == known.gpu_type();
            if (!kept && std::find(stranded.begin(), stranded.end(), r.spec->id) == stranded.end()) {
              stranded.push_back(r.spec->id);
            }
          }
        }
      }
      node_link_[it->second] = link;
      telemetry_.erase(it->second);  // readings by GPU index: the indexes may mean other GPUs now
      for (const std::string& id : stranded) {
        EndOnFault(id, it->second, fmt::format("its GPU on {} is gone (the node re-registered with other GPUs)", n.id),
                   true);
      }
      Node fresh = n;
      fresh.state = known.state == NodeState::kDown ? NodeState::kUp : known.state;
      for (size_t g = 0; g < fresh.gpus.size() && g < known.gpus.size(); ++g)
        fresh.gpus[g].fenced = known.gpus[g].fenced;
      bool was_down = known.state == NodeState::kDown;
      known = std::move(fresh);
      node_link_[it->second] = link;
      last_seen_[it->second] = Now();
      PersistNode(it->second);
      NodeEvent(n.id, was_down ? "back" : "registered", {{"gpus", n.gpus.size()}});
    }
    // Reconcile: adopt what the agent still runs, finish what ended, resend what it never got.
    std::set<std::pair<std::string, std::string>> reported;
    for (const RunReport& r : runs) {
      reported.insert({r.job_id, r.node_id});
      JobRecord* job = Find(r.job_id);
      bool current = job && job->runs == r.run && !IsTerminal(job->state) && job->state != JobState::kPending;
      if (!current) {
        if (!r.exited) link->Stop({r.job_id, r.run, r.node_id, 0, "not assigned by the controller"});
        continue;
      }
      if (r.exited) DoExited(r.job_id, r.run, r.node_id, r.exit_code, r.reason, r.ended_ms);
    }
    for (auto& [seq, job] : jobs_) {
      if (job.state != JobState::kRunning && job.state != JobState::kStopping) continue;
      for (const NodeShare& ns : job.placement.nodes) {
        const std::string& node_id = snap_.nodes[ns.node].id;
        if (node_link_[ns.node] != link || reported.count({job.spec->id, node_id})) continue;
        if (job.state == JobState::kStopping) {
          DoExited(job.spec->id, job.runs, node_id, -1, "gone when its agent reconnected");
        } else {
          Event(job, "resent", {{"node", node_id}});
          SendStart(job, ns.node);
        }
      }
    }
    dirty_ = true;
    return Status::Ok();
  };
  return Call(attach);
}

void Controller::PersistNode(int n) { dirty_nodes_.insert(n); }

void Controller::SetUsers(std::shared_ptr<const UserDirectory> users) {
  Call([&] {
    options_.users = std::move(users);
    return 0;
  });
}

void Controller::Start() {
  committer_ = std::thread([this] { CommitLoop(); });
  thread_ = std::thread([this] { Loop(); });
}

void Controller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    commit_stop_ = true;
  }
  commit_cv_.notify_all();
  committer_.join();
}

std::future<void> Controller::Enqueue(std::function<void()> apply, std::function<void()> after_cycle) {
  Post p{std::move(apply), std::move(after_cycle), {}};
  std::future<void> f = p.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    posts_.push_back(std::move(p));
  }
  cv_.notify_one();
  return f;
}

void Controller::Sync() {
  Call([] { return 0; });
}

void Controller::Loop() {
  using Clock = std::chrono::steady_clock;
  auto next_tick = Clock::now() + std::chrono::milliseconds(options_.tick_ms);
  auto cycle_allowed_at = Clock::now();
  std::deque<Post> work;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto deadline = next_tick;
      if (dirty_ && cycle_allowed_at < deadline) deadline = cycle_allowed_at;
      cv_.wait_until(lock, deadline, [&] { return stopping_ || !posts_.empty(); });
      if (stopping_ && posts_.empty()) break;
      work.swap(posts_);
    }
    std::vector<std::exception_ptr> failures(work.size());
    for (size_t i = 0; i < work.size(); ++i) {
      try {
        work[i].apply();
      } catch (const std::exception& e) {
        // A bug, not an input error (inputs are validated): answer 500 and go on.
        std::fprintf(stderr, "gantry: controller: %s\n", e.what());
        failures[i] = std::current_exception();
      }
    }
    auto now = Clock::now();
    if (now >= next_tick) {
      Tick();
      next_tick = now + std::chrono::milliseconds(options_.tick_ms);
    }
    // A cycle runs after every batch that changed something. A cycle that took over 1 ms
    // (a long queue) makes the next wait four times as long, so cycles take at most a fifth
    // of the thread: a 5 ms cycle waits 20 ms. Cheap cycles never wait.
    if (dirty_ && now >= cycle_allowed_at) {
      auto t0 = Clock::now();
      Cycle();
      auto took = Clock::now() - t0;
      cycle_seconds_.Observe(std::chrono::duration<double>(took).count());
      bool slow = options_.defer_slow_cycles && took > std::chrono::milliseconds(1);
      cycle_allowed_at = Clock::now() + (slow ? 4 * took : Clock::duration(0));
    }
    for (size_t i = 0; i < work.size(); ++i) {
      if (work[i].after_cycle && !failures[i]) work[i].after_cycle();
    }
    // Hand the batch to the committer and go on: the next batch is applied while this one
    // is written, and its callers are answered (and its orders sent) once it is durable.
    Commit c = PrepareCommit();
    for (size_t i = 0; i < work.size(); ++i) c.waiters.emplace_back(std::move(work[i].done), failures[i]);
    work.clear();
    {
      std::lock_guard<std::mutex> lock(commit_mu_);
      commits_.push_back(std::move(c));
    }
    commit_cv_.notify_one();
  }
}

void Controller::CommitLoop() {
  for (;;) {
    std::deque<Commit> ready;
    {
      std::unique_lock<std::mutex> lock(commit_mu_);
      commit_cv_.wait(lock, [&] { return commit_stop_ || !commits_.empty(); });
      if (commits_.empty()) return;
      ready.swap(commits_);
    }
    // Everything that queued up while the last write ran goes in one transaction.
    StoreBatch merged = std::move(ready.front().batch);
    for (size_t i = 1; i < ready.size(); ++i) merged.Append(std::move(ready[i].batch));
    if (!merged.empty()) {
      auto t0 = std::chrono::steady_clock::now();
      Status s = store_->Commit(merged);
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      {
        std::lock_guard<std::mutex> lock(commit_metrics_mu_);
        commit_seconds_.Observe(took);
      }
      if (!s.ok()) {
        // Memory holds changes the store refused. None of them was acknowledged; a
        // restart rebuilds from what is durable.
        std::fprintf(stderr, "gantry: store commit failed, exiting: %s\n", s.ToString().c_str());
        std::fflush(stderr);
        std::_Exit(75);
      }
    }
    for (Commit& c : ready) {
      for (auto& [done, failure] : c.waiters) {
        if (failure) {
          done.set_exception(failure);
        } else {
          done.set_value();
        }
      }
      CarryOut(c.effects);
    }
  }
}

void Controller::CarryOut(Effects& effects) {
  for (Effects::Order& o : effects.orders) {
    if (auto* start = std::get_if<StartOrder>(&o.order)) {
      o.link->Start(*start);
    } else {
      o.link->Stop(std::get<StopOrder>(o.order));
    }
  }
  for (Effects::Webhook& w : effects.webhooks) notifier_.Post(w.url, std::move(w.body));
}

void Controller::SendAfterCommit(int node_index, std::variant<StartOrder, StopOrder> order) {
  NodeLink* link = node_link_[node_index];
  if (link) effects_.orders.push_back({link, std::move(order)});
}

Controller::Commit Controller::PrepareCommit() {
  for (uint64_t seq : dirty_jobs_) {
    const JobRecord& j = jobs_.at(seq);
    batch_.jobs.push_back({j.seq, j.spec->id, j.spec->team, j.spec->user, ToString(j.state),
                           JobToDoc(j, snap_.nodes).dump(-1, ' ', false, kReplaceBadUtf8)});
  }
  for (int n : dirty_nodes_) {
    batch_.nodes.emplace_back(snap_.nodes[n].id,
                              NodeToDoc(snap_.nodes[n], options_.config.catalog).dump(-1, ' ', false, kReplaceBadUtf8));
  }
  if (!batch_.empty()) ++version_;
  Commit c;
  c.batch = std::move(batch_);
  c.effects = std::move(effects_);
  batch_ = StoreBatch();
  effects_ = Effects();
  dirty_jobs_.clear();
  dirty_nodes_.clear();
  return c;
}

JobRecord* Controller::Find(const std::string& id) {
  uint64_t seq = 0;
  auto [ptr, ec] = std::from_chars(id.data(), id.data() + id.size(), seq);
  if (ec != std::errc() || ptr != id.data() + id.size()) return nullptr;
  auto it = jobs_.find(seq);
  return it == jobs_.end() ? nullptr : &it->second;
}

void Controller::Event(const JobRecord& job, const std::string& kind, nlohmann::json detail, TimeMs at_ms) {
  batch_.events.push_back(
      {job.spec->id, at_ms < 0 ? Now() : at_ms, kind, detail.dump(-1, ' ', false, kReplaceBadUtf8)});
}

void Controller::Audit(const Actor& who, const std::string& action, const std::string& target,
                       const std::string& outcome, const std::string& detail) {
  batch_.audit.push_back({Now(), who.user, ToString(who.role), action, target, outcome, detail});
}

Status Controller::Refuse(const Actor& who, const std::string& action, const std::string& target, Status refusal) {
  Audit(who, action, target, CodeName(refusal.code()), refusal.message());
  return refusal;
}

void Controller::RecordAudit(const Actor& who, const std::string& action, const std::string& target,
                             const std::string& outcome, const std::string& detail) {
  Enqueue([=, this] { Audit(who, action, target, outcome, detail); });
}

void Controller::NodeEvent(const std::string& node_id, const std::string& kind, const nlohmann::json& detail) {
  batch_.node_events.push_back({node_id, Now(), kind, detail.dump(-1, ' ', false, kReplaceBadUtf8)});
}

std::string Controller::MetaValue(const std::string& key) {
  return Call([&] {
    auto it = meta_.find(key);
    return it == meta_.end() ? std::string() : it->second;
  });
}

void Controller::SetMetaValue(const std::string& key, const std::string& value) {
  Call([&] {
    meta_[key] = value;
    batch_.meta[key] = value;
    return 0;
  });
}

void Controller::RefreshQuotas() {
  if (!quota_file_) return;
  Status s = quota_file_->Refresh();
  if (!s.ok()) {
    std::fprintf(stderr, "gantry: keeping the last good quotas: %s\n", s.ToString().c_str());
    return;
  }
  if (quota_file_->current() != quotas_) {
    quotas_ = quota_file_->current();
    engine_ = std::make_unique<Engine>(options_.config.catalog, options_.config.scheduler, quotas_.get());
    last_reorder_ = -1;  // weights and guarantees changed: re-sort at the next cycle
    dirty_ = true;
  }
}

}  // namespace gantry
