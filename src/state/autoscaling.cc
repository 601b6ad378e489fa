// Autoscaling: the pools' requests in flight and arrived, the hook calls of each decision,
// back-off after failures, giving up nodes that never register, and the waiting reasons.
#include "state/autoscaling.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "core/node.h"
#include "protocol/spec_json.h"

namespace gantry {

namespace {

constexpr DurationMs kMaxBackoffMs = 5 * kMinuteMs;

std::string Ago(DurationMs d) {
  if (d < kMinuteMs) return fmt::format("{} s", std::max<DurationMs>(d, 0) / kSecondMs);
  return fmt::format("{} min", d / kMinuteMs);
}

}  // namespace

const char* ToString(HookCall::Kind k) { return k == HookCall::Kind::kScaleUp ? "scale_up" : "scale_down"; }

Expected<std::vector<std::string>> ParseNodeIds(const std::string& out) {
  std::vector<std::string> ids;
  std::istringstream lines(out);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    line.erase(0, first);
    if (!IsNodeId(line)) {
      return Status::Invalid(fmt::format("line {}", n), fmt::format("'{}' is not a node id (one per line: {})",
                                                                    OneLineExcerpt(line, 60), kNodeIdRule));
    }
    ids.push_back(line);
  }
  if (ids.empty()) return Status::Invalid("output", "printed no node id");
  return ids;
}

Autoscaling::Autoscaling(AutoscalerConfig config, const GpuCatalog& catalog)
    : config_(std::move(config)),
      catalog_(catalog),
      pools_(config_.pools.size()),
      saved_(Requests().dump(-1, ' ', false, kReplaceBadUtf8)) {}

int Autoscaling::PoolOf(const std::string& node_id, const std::map<std::string, std::string>& labels) const {
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (pools_[p].awaited.count(node_id)) return static_cast<int>(p);
  }
  auto label = labels.find("pool");
  if (label == labels.end()) return -1;
  for (size_t p = 0; p < config_.pools.size(); ++p) {
    if (config_.pools[p].name == label->second) return static_cast<int>(p);
  }
  return -1;
}

void Autoscaling::Adopt(size_t pool, Node& node) {
  const NodePool& p = config_.pools[pool];
  for (const auto& [k, v] : p.labels) node.labels[k] = v;
  node.labels["pool"] = p.name;
  for (const Taint& t : p.taints) {
    if (std::find(node.taints.begin(), node.taints.end(), t) == node.taints.end()) node.taints.push_back(t);
  }
  if (pools_[pool].awaited.erase(node.id)) pools_[pool].counters["nodes_registered"]++;
  returning_.erase(node.id);
  idle_since_.erase(node.id);
}

bool Autoscaling::ScalingUp(const std::string& pool, TimeMs now) const {
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (config_.pools[p].name == pool) {
      return pools_[p].up_running || (pools_[p].adopt_new_until != kNever && now < pools_[p].adopt_new_until);
    }
  }
  return false;
}

int Autoscaling::PoolIndex(const std::string& name) const {
  for (size_t p = 0; p < config_.pools.size(); ++p) {
    if (config_.pools[p].name == name) return static_cast<int>(p);
  }
  return -1;
}

nlohmann::json Autoscaling::Requests() const {
  nlohmann::json out = nlohmann::json::object();
  for (size_t p = 0; p < pools_.size(); ++p) {
    const PoolRuntime& rt = pools_[p];
    if (rt.awaited.empty() && !rt.up_running) continue;
    nlohmann::json pool = {{"awaited", rt.awaited}};
    if (rt.up_running) pool["scale_up_since"] = rt.up_started;
    out[config_.pools[p].name] = std::move(pool);
  }
  return out;
}

void Autoscaling::Restore(const nlohmann::json& requests, TimeMs now) {
  if (!requests.is_object()) return;
  for (size_t p = 0; p < pools_.size(); ++p) {
    auto it = requests.find(config_.pools[p].name);
    if (it == requests.end() || !it->is_object()) continue;
    PoolRuntime& rt = pools_[p];
    const nlohmann::json awaited = it->value("awaited", nlohmann::json::object());  // kept: items() refers to it
    for (const auto& [id, at] : awaited.items()) {
      if (at.is_number_integer()) rt.awaited[id] = at.get<TimeMs>();
    }
    // A scale-up that was running: its nodes (ids unknown) may register for a while yet.
    if (it->contains("scale_up_since")) rt.adopt_new_until = now + config_.register_timeout;
  }
  saved_ = Requests().dump(-1, ' ', false, kReplaceBadUtf8);
}

bool Autoscaling::Changed() {
  std::string now = Requests().dump(-1, ' ', false, kReplaceBadUtf8);
  if (now == saved_) return false;
  saved_ = std::move(now);
  return true;
}

TimeMs Autoscaling::OldestRequest(const PoolRuntime& p) const {
  TimeMs oldest = p.up_running ? p.up_started : kNever;
  for (const auto& [id, at] : p.awaited) oldest = std::min(oldest, at);
  return oldest;
}

HookCall Autoscaling::ScaleDown(size_t pool, std::vector<std::string> nodes) const {
  const NodePool& p = config_.pools[pool];
  HookCall call{HookCall::Kind::kScaleDown, pool, p.name, p.scale_down_command, {p.name}, std::move(nodes), 0,
                config_.hook_timeout};
  call.args.insert(call.args.end(), call.nodes.begin(), call.nodes.end());
  return call;
}

// Requested nodes that never registered within register_timeout are given up: the pool
// stops counting them and the scale-down hook is asked to make sure they are gone.
void Autoscaling::GiveUpLate(TimeMs now, Decision& d) {
  for (size_t p = 0; p < pools_.size(); ++p) {
    PoolRuntime& pool = pools_[p];
    for (auto it = pool.awaited.begin(); it != pool.awaited.end();) {
      if (now - it->second < config_.register_timeout) {
        ++it;
        continue;
      }
      d.log.push_back(fmt::format("autoscaler: node {} of pool {} never registered ({} after its request): given up",
                                  it->first, config_.pools[p].name, Ago(now - it->second)));
      pool.last_error = fmt::format("node {} never registered", it->first);
      pool.last_error_at = now;
      pool.counters["nodes_given_up"]++;
      pool.given_up.push_back(it->first);
      it = pool.awaited.erase(it);
    }
  }
}

Autoscaling::Decision Autoscaling::Run(const std::vector<PoolNode>& nodes, const std::vector<ScalingDemand>& demand,
                                       TimeMs now) {
  Decision d;
  next_run_ = now + std::clamp<DurationMs>(config_.scale_up_after / 2, kSecondMs, 15 * kSecondMs);
  GiveUpLate(now, d);
  std::vector<PoolStatus> status(pools_.size());
  std::set<std::string> present;
  for (const PoolNode& n : nodes) {
    present.insert(n.id);
    if (returning_.count(n.id)) continue;
    if (!n.idle) idle_since_.erase(n.id);
    if (!n.up) continue;
    PoolStatus& s = status[n.pool];
    s.up++;
    if (n.idle) s.idle.push_back({n.id, idle_since_.emplace(n.id, now).first->second});
  }
  std::erase_if(idle_since_, [&](const auto& e) { return !present.count(e.first); });
  for (size_t p = 0; p < pools_.size(); ++p) {
    PoolRuntime& pool = pools_[p];
    status[p].requested = static_cast<int>(pool.awaited.size()) + (pool.up_running ? pool.up_count : 0);
    // Spot is tried again once on-demand has had the jobs for a while.
    if (pool.no_capacity_since != kNever && now - pool.no_capacity_since >= 2 * config_.spot_fallback_after) {
      pool.no_capacity_since = kNever;
    }
    status[p].no_capacity_since = pool.no_capacity_since;
  }
  ScalingPlan plan = PlanScaling(config_, catalog_, status, demand, now);

  waiting_for_ = std::move(plan.waiting_for);
  waiting_pool_.clear();
  for (const auto& [job, text] : waiting_for_) {
    for (size_t p = 0; p < config_.pools.size(); ++p) {
      if (text == "a node from pool " + config_.pools[p].name) waiting_pool_[job] = p;
    }
  }
  for (const auto& [p, count] : plan.add) {
    PoolRuntime& pool = pools_[p];
    const NodePool& cfg = config_.pools[p];
    if (pool.up_running || now < pool.retry_at || cfg.scale_up_command.empty()) continue;
    pool.up_running = true;
    pool.up_count = count;
    pool.up_started = now;
    pool.counters["scale_up_calls"]++;
    d.hooks.push_back({HookCall::Kind::kScaleUp,
                       p,
                       cfg.name,
                       cfg.scale_up_command,
                       {cfg.name, std::to_string(count)},
                       {},
                       count,
                       config_.hook_timeout});
    d.log.push_back(fmt::format("autoscaler: asking pool {} for {} node(s)", cfg.name, count));
  }
  std::map<size_t, std::vector<std::string>> down;
  for (const std::string& id : plan.remove) {
    for (const PoolNode& n : nodes) {
      if (n.id != id || pools_[n.pool].down_running || config_.pools[n.pool].scale_down_command.empty()) continue;
      down[n.pool].push_back(id);
    }
  }
  for (size_t p = 0; p < pools_.size(); ++p) {
    PoolRuntime& pool = pools_[p];
    if (pool.down_running || config_.pools[p].scale_down_command.empty()) continue;
    std::vector<std::string> ids = std::move(down[p]);
    for (const std::string& id : ids) {
      returning_.insert(id);
      d.drain.push_back(id);
    }
    ids.insert(ids.end(), pool.given_up.begin(), pool.given_up.end());
    pool.given_up.clear();
    if (ids.empty()) continue;
    pool.down_running = true;
    pool.counters["scale_down_calls"]++;
    d.log.push_back(fmt::format("autoscaler: giving back {} node(s) of pool {}: {}", ids.size(), config_.pools[p].name,
                                fmt::join(ids, ", ")));
    d.hooks.push_back(ScaleDown(p, std::move(ids)));
  }
  return d;
}

void Autoscaling::Failed(PoolRuntime& p, const HookCall& call, const std::string& what, TimeMs now, Outcome& out) {
  p.failures++;
  DurationMs backoff = std::max<DurationMs>(config_.scale_up_after, kSecondMs);
  for (int i = 1; i < p.failures && backoff < kMaxBackoffMs; ++i) backoff *= 2;
  backoff = std::min(backoff, kMaxBackoffMs);
  p.retry_at = now + backoff;
  p.last_error = fmt::format("{} failed: {}", ToString(call.kind), what);
  p.last_error_at = now;
  p.counters[std::string(ToString(call.kind)) + "_failures"]++;
  out.log.push_back(fmt::format("autoscaler: pool {}: {}; next try in {}", call.pool_name, p.last_error, Ago(backoff)));
  out.audit_outcome = "failed";
  out.audit_detail = p.last_error;
}

void Autoscaling::UpFinished(PoolRuntime& p, const HookCall& call, const CommandResult& result, TimeMs now,
                             Outcome& out) {
  const NodePool& cfg = config_.pools[call.pool];
  if (!result.timed_out && result.exit_code == 3) {
    p.counters["no_capacity"]++;
    out.audit_outcome = "no_capacity";
    out.audit_detail = OneLineExcerpt(result.err_tail);
    if (cfg.capacity == Capacity::kSpot) {
      if (p.no_capacity_since == kNever) p.no_capacity_since = now;
      out.log.push_back(fmt::format("autoscaler: pool {} has no spot capacity; its jobs go on demand after {}",
                                    cfg.name, Ago(config_.spot_fallback_after)));
      return;
    }
    Failed(p, call, "no capacity", now, out);
    out.audit_outcome = "no_capacity";
    return;
  }
  if (result.timed_out || result.exit_code != 0) {
    std::string err = OneLineExcerpt(result.err_tail);
    Failed(p, call, result.Outcome() + (err.empty() ? "" : ": " + err), now, out);
    return;
  }
  auto ids = ParseNodeIds(result.out);
  if (!ids) {
    Failed(p, call, "its output is not node ids: " + ids.status().ToString(), now, out);
    return;
  }
  p.failures = 0;
  p.retry_at = 0;
  if (cfg.capacity == Capacity::kSpot) p.no_capacity_since = kNever;
  if (ids->size() > static_cast<size_t>(call.count)) {
    // More than it was asked for: the pool takes what it asked for (max_nodes holds), and
    // the rest, the hook's own ids, go back to its cloud.
    std::vector<std::string> extra(ids->begin() + call.count, ids->end());
    ids->resize(static_cast<size_t>(call.count));
    out.log.push_back(
        fmt::format("autoscaler: pool {}'s scale-up printed {} more id(s) than the {} asked for; "
                    "giving back {}",
                    cfg.name, extra.size(), call.count, fmt::join(extra, ", ")));
    p.given_up.insert(p.given_up.end(), extra.begin(), extra.end());
  }
  for (const std::string& id : *ids) p.awaited.emplace(id, now);
  out.requested = *ids;
  p.counters["nodes_requested"] += ids->size();
  out.audit_detail = fmt::format("{} node(s): {}", ids->size(), fmt::join(*ids, ", "));
  out.log.push_back(fmt::format("autoscaler: pool {} is starting {} (in {:.1f} s)", cfg.name, fmt::join(*ids, ", "),
                                static_cast<double>(result.took_ms) / 1000));
}

Autoscaling::Outcome Autoscaling::Finished(const HookCall& call, const CommandResult& result, TimeMs now) {
  Outcome out;
  PoolRuntime& p = pools_[call.pool];
  if (call.kind == HookCall::Kind::kScaleUp) {
    p.up_running = false;
    UpFinished(p, call, result, now, out);
    return out;
  }
  p.down_running = false;
  if (!result.timed_out && result.exit_code == 0) {
    for (const std::string& id : call.nodes) {
      returning_.erase(id);
      idle_since_.erase(id);
      out.returned.push_back(id);
    }
    p.counters["nodes_returned"] += call.nodes.size();
    out.audit_detail = fmt::format("{} node(s): {}", call.nodes.size(), fmt::join(call.nodes, ", "));
    return out;
  }
  std::string err = OneLineExcerpt(result.err_tail);
  Failed(p, call, result.Outcome() + (err.empty() ? "" : ": " + err), now, out);
  for (const std::string& id : call.nodes) {
    if (returning_.erase(id)) out.undrain.push_back(id);
  }
  return out;
}

std::string Autoscaling::WaitReason(const std::string& job_id, TimeMs now) const {
  auto it = waiting_for_.find(job_id);
  if (it == waiting_for_.end()) return "";
  auto pool = waiting_pool_.find(job_id);
  if (pool == waiting_pool_.end()) return "waiting for " + it->second;
  const PoolRuntime& p = pools_[pool->second];
  std::string text = "waiting for " + it->second;
  if (config_.pools[pool->second].scale_up_command.empty())
    return text + " (the pool has no hooks: nodes come by hand)";
  TimeMs asked = OldestRequest(p);
  if (asked != kNever) text += fmt::format(" (requested {} ago)", Ago(now - asked));
  if (p.last_error_at != kNever && p.failures > 0) {
    text += fmt::format("; the pool's last {} ({} ago){}", p.last_error, Ago(now - p.last_error_at),
                        p.retry_at > now ? fmt::format(", next try in {}", Ago(p.retry_at - now)) : "");
  }
  return text;
}

nlohmann::json Autoscaling::View(const std::vector<PoolNode>& nodes, TimeMs now) const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t p = 0; p < pools_.size(); ++p) {
    const NodePool& cfg = config_.pools[p];
    const PoolRuntime& rt = pools_[p];
    nlohmann::json up = nlohmann::json::array(), idle = nlohmann::json::array(), other = nlohmann::json::array();
    for (const PoolNode& n : nodes) {
      if (n.pool != p) continue;
      (returning_.count(n.id) || !n.up ? other : n.idle ? idle : up).push_back(n.id);
    }
    nlohmann::json awaited = nlohmann::json::array();
    for (const auto& [id, at] : rt.awaited) awaited.push_back({{"node", id}, {"requested_s_ago", (now - at) / 1000}});
    nlohmann::json pool = {{"name", cfg.name},
                           {"gpu_type", catalog_.Get(cfg.type).name},
                           {"gpus_per_node", cfg.gpus_per_node},
                           {"capacity", ToString(cfg.capacity)},
                           {"min_nodes", cfg.min_nodes},
                           {"max_nodes", cfg.max_nodes},
                           {"price_per_gpu_hour", cfg.PricePerGpuHour(catalog_)},
                           {"scaled", !cfg.scale_up_command.empty()},
                           {"busy_nodes", up},
                           {"idle_nodes", idle},
                           {"other_nodes", other},
                           {"awaited", awaited},
                           {"scale_up_running", rt.up_running ? rt.up_count : 0},
                           {"scale_down_running", rt.down_running}};
    if (rt.failures > 0) {
      pool["last_error"] = rt.last_error;
      pool["last_error_s_ago"] = (now - rt.last_error_at) / 1000;
      pool["next_try_in_s"] = std::max<TimeMs>(0, rt.retry_at - now) / 1000;
    }
    if (rt.no_capacity_since != kNever) pool["no_capacity_s"] = (now - rt.no_capacity_since) / 1000;
    out.push_back(std::move(pool));
  }
  return out;
}

void Autoscaling::WriteMetrics(MetricsWriter& w) const {
  if (!enabled()) return;
  w.Family("gantry_pool_nodes_requested", "gauge", "Nodes asked of a pool's cloud that have not registered yet");
  for (size_t p = 0; p < pools_.size(); ++p) {
    w.Sample("gantry_pool_nodes_requested", {{"pool", config_.pools[p].name}},
             static_cast<double>(pools_[p].awaited.size() + (pools_[p].up_running ? pools_[p].up_count : 0)));
  }
  w.Family("gantry_pool_hook_running", "gauge", "A pool's hook is running (1) by hook");
  for (size_t p = 0; p < pools_.size(); ++p) {
    w.Sample("gantry_pool_hook_running", {{"pool", config_.pools[p].name}, {"hook", "scale_up"}},
             pools_[p].up_running ? 1 : 0);
    w.Sample("gantry_pool_hook_running", {{"pool", config_.pools[p].name}, {"hook", "scale_down"}},
             pools_[p].down_running ? 1 : 0);
  }
  const std::pair<const char*, const char*> counters[] = {
      {"scale_up_calls", "Scale-up hook calls"},
      {"scale_down_calls", "Scale-down hook calls"},
      {"scale_up_failures", "Scale-up hook calls that failed, timed out or printed garbage"},
      {"scale_down_failures", "Scale-down hook calls that failed or timed out"},
      {"no_capacity", "Scale-up calls answered 'no capacity' (exit code 3)"},
      {"nodes_requested", "Nodes a pool's cloud said it is starting"},
      {"nodes_registered", "Requested nodes that registered"},
      {"nodes_given_up", "Requested nodes that never registered within register_timeout"},
      {"nodes_returned", "Nodes given back to a pool's cloud"}};
  for (const auto& [key, help] : counters) {
    std::string name = fmt::format("gantry_pool_{}_total", key);
    w.Family(name, "counter", help);
    for (size_t p = 0; p < pools_.size(); ++p) {
      auto it = pools_[p].counters.find(key);
      w.Sample(name, {{"pool", config_.pools[p].name}},
               it == pools_[p].counters.end() ? 0 : static_cast<double>(it->second));
    }
  }
}

}  // namespace gantry
