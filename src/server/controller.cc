// The controller's thread and its group commit: requests and node reports are posted,
// applied in batches to the state machine (controller_state.h), and the state's output is
// written by the committer before callers are answered and orders sent. Also recovery
// (the store's rows into the state) and the calls that read the store.
#include "server/controller.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/clock.h"
#include "core/notify.h"
#include "server/audit_routes.h"

namespace gantry {

namespace {

std::shared_ptr<const QuotaConfig> InitialQuotas(const ControllerOptions& options,
                                                 std::unique_ptr<ReloadableFile<QuotaConfig>>& file) {
  auto quotas = std::make_shared<const QuotaConfig>(options.config.quotas);
  if (options.quotas_path.empty()) return quotas;
  const GpuCatalog* catalog = &options.config.catalog;
  file = std::make_unique<ReloadableFile<QuotaConfig>>(
      options.quotas_path, [catalog](const std::string& path) { return QuotaConfig::LoadFile(path, *catalog); });
  return file->Refresh().ok() ? file->current() : quotas;
}

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Controller::Controller(ControllerOptions options, std::unique_ptr<Store> store)
    : options_(std::move(options)),
      store_(std::move(store)),
      quotas_(InitialQuotas(options_, quota_file_)),
      state_(options_, quotas_,
             [this](const std::string& line) {
               if (options_.log) {
                 options_.log(line);
               } else {
                 std::cerr << FormatUtc(Now()) << " " << line << "\n";
               }
             }),
      notifier_(options_.sendmail) {
  // Read by state_ as it audits and as it takes a job's mail address.
  if (!options_.audit_words) options_.audit_words = AuditRoute;
  if (!options_.mail_ready) {
    options_.mail_ready = [sendmail = options_.sendmail] { return ::access(sendmail.c_str(), X_OK) == 0; };
  }
}

Controller::~Controller() { Stop(); }

TimeMs Controller::Now() const { return options_.now ? options_.now() : WallClock().NowMs(); }

void Controller::SetStateTime() { state_.SetTime(Now(), SteadyMicros()); }

Status Controller::Recover() {
  SetStateTime();
  auto stored = store_->Load();
  if (!stored) return stored.status();
  auto open = store_->OpenAllocations();
  if (!open) return open.status();
  if (Status s = state_.Recover(*stored, std::move(*open)); !s.ok()) return s;
  sessions_.Load(stored->sessions);
  auto month = store_->Allocations(state_.MonthStart(), state_.MonthEnd());
  state_.StartMonth(month ? *month : std::vector<Allocation>{});
  return Status::Ok();
}

Status Controller::AttachNodes(const std::vector<Node>& nodes, NodeLink* link, const std::vector<RunReport>& runs,
                               std::vector<PlacedRun>* adopted) {
  return Call([&] { return state_.AttachNodes(nodes, link, runs, adopted); });
}

void Controller::SetUsers(std::shared_ptr<const UserDirectory> users) {
  Call([&] {
    state_.SetUsers(std::move(users));
    return 0;
  });
}

void Controller::Start() {
  committer_ = std::thread([this] { CommitLoop(); });
  thread_ = std::thread([this] { Loop(); });
}

void Controller::Stop() {
  hooks_.Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  notifier_.Stop();  // what it still sends reports to a queue nobody reads now, while it exists
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    commit_stop_ = true;
  }
  commit_cv_.notify_all();
  committer_.join();
}

std::future<void> Controller::Enqueue(std::function<void()> apply, std::function<void()> after_cycle, PostKind kind) {
  Post p{std::move(apply), std::move(after_cycle), {}, kind};
  std::future<void> f = p.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    posts_.push_back(std::move(p));
  }
  cv_.notify_one();
  return f;
}

void Controller::Sync() {
  View([] { return 0; });
}

namespace {

// A change that threw has been applied in part: nothing of its batch is committed, and the
// process ends. The store holds every change ever acknowledged; a restart (or the standby)
// recovers from it.
[[noreturn]] void EndHalfApplied(const char* what) {
  std::fprintf(stderr,
               "gantry: controller: a change failed half-way (%s); ending without committing its batch (the "
               "store holds every acknowledged change: restart to recover from it)\n",
               what);
  std::fflush(stderr);
  std::abort();
}

}  // namespace

void Controller::Loop() {
  using Steady = std::chrono::steady_clock;
  auto next_tick = Steady::now() + std::chrono::milliseconds(options_.tick_ms);
  auto cycle_allowed_at = Steady::now();
  std::deque<Post> work;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto deadline = next_tick;
      if (state_.dirty() && cycle_allowed_at < deadline) deadline = cycle_allowed_at;
      cv_.wait_until(lock, deadline, [&] { return stopping_ || !posts_.empty(); });
      if (stopping_ && posts_.empty()) break;
      work.swap(posts_);
    }
    std::vector<std::exception_ptr> failures(work.size());
    for (size_t i = 0; i < work.size(); ++i) {
      try {
        SetStateTime();
        work[i].apply();
      } catch (const std::exception& e) {
        // A bug, not an input error (inputs are validated). A view answers 500 and the
        // server goes on; a change may have been applied in part.
        if (work[i].kind == PostKind::kChange) EndHalfApplied(e.what());
        std::fprintf(stderr, "gantry: controller: %s\n", e.what());
        failures[i] = std::current_exception();
      } catch (...) {
        if (work[i].kind == PostKind::kChange) EndHalfApplied("an exception of no known type");
        failures[i] = std::current_exception();
      }
    }
    auto now = Steady::now();
    if (now >= next_tick) {
      SetStateTime();
      Tick();
      next_tick = now + std::chrono::milliseconds(options_.tick_ms);
    }
    // A cycle runs after every batch that changed something. A cycle that took over 1 ms
    // (a long queue) makes the next wait four times as long, so cycles take at most a fifth
    // of the thread: a 5 ms cycle waits 20 ms. Cheap cycles never wait.
    if (state_.dirty() && now >= cycle_allowed_at) {
      SetStateTime();
      auto t0 = Steady::now();
      state_.Cycle();
      auto took = Steady::now() - t0;
      cycle_seconds_.Observe(std::chrono::duration<double>(took).count());
      bool slow = options_.defer_slow_cycles && took > std::chrono::milliseconds(1);
      cycle_allowed_at = Steady::now() + (slow ? 4 * took : Steady::duration(0));
    }
    for (size_t i = 0; i < work.size(); ++i) {
      if (work[i].after_cycle && !failures[i]) work[i].after_cycle();
    }
    // Hand the batch to the committer and go on: the next batch is applied while this one
    // is written, and its callers are answered (and its orders sent) once it is durable.
#ifdef GANTRY_CHECK_INVARIANTS
    // Sanitized builds (every test run): each batch leaves every index in step with the jobs.
    if (Status held = state_.CheckInvariants(); !held.ok()) EndHalfApplied(held.message().c_str());
#endif
    ControllerState::Output out = state_.TakeOutput();
    Commit c{std::move(out.batch), {}, std::move(out.effects)};
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
  // A job's notification: how it went goes on the job's events.
  auto delivery = [this](const std::string& job_id, const std::string& event, const char* via,
                         const std::string& to) -> Notifier::Done {
    if (job_id.empty()) return nullptr;
    return [this, job_id, event, via, to](bool delivered, const std::string& why) {
      Enqueue([this, job_id, event, via, to, delivered, why] {
        state_.NotificationDelivered(job_id, event, via, to, delivered, why);
      });
    };
  };
  for (Effects::Webhook& w : effects.webhooks) {
    // The webhook's host only: its address may be its credential (Slack's).
    notifier_.Post(w.url, std::move(w.body), delivery(w.job_id, w.event, "webhook", UrlHost(w.url)));
  }
  for (const Effects::Mail& m : effects.mails) {
    notifier_.Mail(m.to, m.subject, m.body, delivery(m.job_id, m.event, "mail", m.to));
  }
  for (HookCall& call : effects.hooks) {
    hooks_.Run(std::move(call), [this](const HookCall& done, const CommandResult& result) {
      Enqueue([this, done, result] { state_.HookFinished(done, result); });
    });
  }
}

void Controller::Tick() {
  RefreshQuotas();
  if (state_.MonthOver()) {
    auto month = store_->Allocations(state_.MonthStart(), state_.MonthEnd());
    state_.StartMonth(month ? *month : std::vector<Allocation>{});
  }
  state_.Tick();
  if (Now() - sessions_saved_ms_ >= 30 * 1000) {  // sessions' last use, and ended ones to drop
    sessions_saved_ms_ = Now();
    state_.SaveSessions(sessions_.TakeChanged(Now()));
  }
}

void Controller::SaveSessions(bool wait) {
  std::future<void> saved = Enqueue([this] { state_.SaveSessions(sessions_.TakeChanged(Now())); });
  if (wait) saved.get();
}

void Controller::RefreshQuotas() {
  if (!quota_file_) return;
  Status s = quota_file_->Refresh();
  if (s.code() == StatusCode::kNotFound && !quota_file_->current()) return;  // not written yet
  if (!s.ok()) {
    std::fprintf(stderr, "gantry: keeping the last good quotas: %s\n", s.ToString().c_str());
    return;
  }
  if (quota_file_->current() != quotas_) {
    quotas_ = quota_file_->current();
    state_.SetQuotas(quotas_);
  }
}

}  // namespace gantry
