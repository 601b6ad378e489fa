// The job runner's thread shell: orders queue for one thread, which hands them to the node's
// runs (node_runs.h) and ticks them every poll_ms.
#include "agent/local_agent.h"

#include <filesystem>

namespace gantry {

NodeRunsOptions LocalAgent::RunsOptions(const LocalAgentOptions& o) {
  return NodeRunsOptions{.state_dir = o.state_dir,
                         .shim = o.shim,
                         .run_as = o.run_as,
                         .min_job_uid = o.min_job_uid,
                         .mps_daemons = !o.mps_control.empty(),
                         .gpus = o.gpus,
                         .load_sink = o.load_sink,
                         .max_log_bytes = o.max_log_bytes};
}

namespace {

LocalAgentOptions Absolute(LocalAgentOptions o) {
  std::error_code ec;
  o.state_dir = std::filesystem::absolute(o.state_dir, ec).lexically_normal().string();  // jobs chdir away
  o.containers.instance = o.state_dir;
  return o;
}

}  // namespace

LocalAgent::LocalAgent(LocalAgentOptions options, NodeReports& reports)
    : options_(Absolute(std::move(options))),
      own_env_(options_.env ? nullptr : MakeHostNodeEnv(options_.cgroups, options_.mps_control, options_.containers)),
      env_(options_.env ? options_.env : own_env_.get()),
      runs_(RunsOptions(options_), reports, *env_, options_.launcher ? *options_.launcher : ShimLauncher(),
            options_.clock ? *options_.clock : WallClock(), [this](const std::string& key) { EndRunSessions(key); }) {}

LocalAgent::~LocalAgent() { Shutdown(); }

void LocalAgent::Serve() {
  thread_ = std::thread([this] { Loop(); });
}

void LocalAgent::Shutdown() {
  EndSessions();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LocalAgent::Post(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    orders_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void LocalAgent::Start(const StartOrder& order) {
  Post([this, order] { runs_.Start(order); });
}

void LocalAgent::Stop(const StopOrder& order) {
  Post([this, order] { runs_.Stop(order); });
}

void LocalAgent::Loop() {
  for (;;) {
    std::deque<std::function<void()>> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms), [&] { return stopping_ || !orders_.empty(); });
      if (stopping_) return;
      work.swap(orders_);
    }
    for (auto& w : work) w();
    runs_.Tick();
  }
}

}  // namespace gantry
