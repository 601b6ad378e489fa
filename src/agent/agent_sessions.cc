// The agent's side of interactive sessions: a thread per session, which asks the agent
// thread (the runs' own) what the session needs (node_runs_sessions.cc), waits for a run
// that has not started yet, ends with its run, and ends gantry shell's hold.
#include <fmt/format.h>
#include <poll.h>

#include <chrono>
#include <future>

#include "agent/local_agent.h"
#include "agent/port_session.h"
#include "agent/process.h"
#include "core/job_logs.h"
#include "protocol/order_wire.h"

namespace gantry {

namespace {

// A run that was just placed may not have started here yet: a session waits this long.
constexpr auto kRunWait = std::chrono::seconds(10);

// Whether the client's end of `fd` is gone (closed or reset), without reading what it sent.
bool PeerHungUp(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

template <typename T>
Expected<T> LocalAgent::OnAgentThread(std::function<Expected<T>()> f) {
  auto promise = std::make_shared<std::promise<Expected<T>>>();
  std::future<Expected<T>> answer = promise->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(StatusCode::kUnavailable, "the agent is stopping");
    orders_.push_back([promise, f = std::move(f)] { promise->set_value(f()); });
  }
  cv_.notify_one();
  if (answer.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Status(StatusCode::kUnavailable, "the agent did not answer in time");
  }
  return answer.get();
}

void LocalAgent::OpenStream(const StreamOrder& order, std::unique_ptr<ByteStream> stream) {
  if (!stream || sessions_stop_) return;
  auto shared = std::make_shared<std::unique_ptr<ByteStream>>(std::move(stream));
  session_threads_.Spawn([this, order, shared] { RunSession(order, std::move(*shared)); });
}

void LocalAgent::EndSessions() {
  sessions_stop_ = true;
  {
    std::lock_guard<std::mutex> lock(run_sessions_mu_);
    for (auto& [key, stop] : run_sessions_) *stop = true;
  }
  session_threads_.JoinAll();
}

void LocalAgent::EndRunSessions(const std::string& key) {
  std::lock_guard<std::mutex> lock(run_sessions_mu_);
  auto [from, to] = run_sessions_.equal_range(key);
  for (auto it = from; it != to; ++it) *it->second = true;
}

void LocalAgent::RunSession(const StreamOrder& order, std::unique_ptr<ByteStream> stream) {
  const std::string key = NodeRuns::Key(order.job_id, order.run, order.node_id);
  Expected<SessionTarget> target = Status::NotFound("");
  for (auto deadline = std::chrono::steady_clock::now() + kRunWait;;) {
    target = OnAgentThread<SessionTarget>([this, order] { return runs_.SessionTargetFor(order); });
    if (target || target.status().code() != StatusCode::kNotFound || sessions_stop_ ||
        std::chrono::steady_clock::now() > deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const bool port = order.kind == StreamKind::kPort;
  if (!target && port) {
    return RefusePortSession(*stream, target.status().code() == StatusCode::kPermissionDenied ? 403 : 502,
                             target.status().message());
  }
  if (!target) return RefuseSession(*stream, target.status().message());
  if (!port)
    std::fprintf(stderr, "gantry agent: %s session for %s in job %s (run %d)\n", ToString(order.kind),
                 order.who.c_str(), order.job_id.c_str(), order.run);
  // The session ends with its run (or the agent): a flag the run's end sets.
  auto stop = std::make_shared<std::atomic<bool>>(sessions_stop_.load());
  decltype(run_sessions_)::iterator registered;
  {
    std::lock_guard<std::mutex> lock(run_sessions_mu_);
    registered = run_sessions_.emplace(key, stop);
  }
  struct Unregister {
    LocalAgent* agent;
    decltype(run_sessions_)::iterator it;
    ~Unregister() {
      std::lock_guard<std::mutex> lock(agent->run_sessions_mu_);
      agent->run_sessions_.erase(it);
    }
  } unregister{this, registered};
  if (port) {
    // The job's own account listens there: not a neighbour that bound the port first.
    if (Status mine = CheckPortListener("/proc/net", target->port, target->uid); !mine.ok()) {
      return RefusePortSession(*stream, mine.code() == StatusCode::kPermissionDenied ? 403 : 502,
                               fmt::format("job {}'s port '{}': {}", order.job_id, target->port_name, mine.message()));
    }
    return RunPortSession(target->port, target->port_name, env_->PortToken(options_.state_dir, order.job_id, order.run),
                          *stream, *stop);
  }
  if (order.kind == StreamKind::kAttach) {
    const std::string exit_file = target->run_exit_file;
    auto ended = [this, &key, &exit_file] {
      int status = RunEndedStatus(key);
      return status == -2 || exit_file.empty() ? status : ReadExitFile(exit_file);
    };
    return RunAttachSession(*target, *stream, ended, *stop);
  }
  // A run that ended while the session was being set up ends it at once.
  if (RunEndedStatus(key) != -2) *stop = true;
  // A container job is running from its `podman run`; its container exists a moment later.
  // The wait ends when the run ends or the client hangs up (its slot on the server is free).
  auto give_up = [&] { return stop->load() || PeerHungUp(stream->fd()) || RunEndedStatus(key) != -2; };
  if (!target->container.empty() && !*stop &&
      !WaitForContainer(options_.containers, target->container, 30000, give_up)) {
    if (!give_up()) {
      return RefuseSession(
          *stream, fmt::format("job {}'s container {} did not start within 30 s", order.job_id, target->container));
    }
    *stop = true;
  }
  int status = RunExecSession(order, *target, *stream, *stop);
  if (order.end_job) {  // gantry shell: the hold ends with its session, and as it did (salloc's command)
    OnAgentThread<bool>([this, key, status]() -> Expected<bool> {
      runs_.EndHold(key, status < 0 ? 1 : status);
      return true;
    });
  }
}

int LocalAgent::RunEndedStatus(const std::string& key) {
  auto status = OnAgentThread<int>([this, key]() -> Expected<int> { return runs_.Running(key) ? -2 : -1; });
  return status ? *status : -1;
}

}  // namespace gantry
