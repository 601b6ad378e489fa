// PoolHooks: a thread per hook call, joined when the next call comes or at Stop.
#include "server/pool_hooks.h"

namespace gantry {

void PoolHooks::Run(HookCall call, Done done) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->finished) {
      it->thread.join();
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  if (stopping_) return;
  Running& r = running_.emplace_back();
  r.thread = std::thread([this, &r, call = std::move(call), done = std::move(done)] {
    CommandRequest req;
    req.command = call.command + " \"$@\"";  // the arguments follow the command, as a program's
    req.args = call.args;
    req.env = {{"GANTRY_POOL", call.pool_name}, {"GANTRY_HOOK", ToString(call.kind)}};
    req.timeout_ms = call.timeout_ms;
    req.cancel = &stopping_;
    CommandResult result = RunCommand(req);
    if (!stopping_) done(call, result);
    r.finished = true;
  });
}

void PoolHooks::Stop() {
  stopping_ = true;
  std::list<Running> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(running_);
  }
  for (Running& r : all) r.thread.join();
}

}  // namespace gantry
