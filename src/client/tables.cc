// Table rendering for the client commands.
#include "client/tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <ostream>

#include "client/terminal_safe.h"
#include "core/job_arrays.h"

namespace gantry {

namespace {

std::string Str(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// One line of a table: an item, or the tasks of one array that read alike.
struct Row {
  const nlohmann::json* item = nullptr;
  std::vector<int> tasks;
};

// Items of one array side by side with the same `key` (state, reason) become one row;
// an empty key keeps an item on its own row.
std::vector<Row> GroupTasks(const nlohmann::json& items, const std::function<std::string(const nlohmann::json&)>& key) {
  std::vector<Row> rows;
  for (const auto& item : items) {
    bool task = item.contains("array_job_id");
    if (task && !rows.empty()) {
      const nlohmann::json& last = *rows.back().item;
      std::string k = key(item);
      if (!k.empty() && last.value("array_job_id", "") == item["array_job_id"] && key(last) == k) {
        rows.back().tasks.push_back(item.value("array_task_id", 0));
        continue;
      }
    }
    rows.push_back({&item, task ? std::vector<int>{item.value("array_task_id", 0)} : std::vector<int>{}});
  }
  return rows;
}

// "7", "12_4", or "12_[0-99:2]" for several tasks.
// An event's detail as "key=value ...": numbers as people write them (no 2e-06), text as it
// is, a map inside as "outer.key=value".
std::string DetailText(const nlohmann::json& detail, const std::string& prefix = "") {
  if (!detail.is_object()) return "";
  std::string out;
  for (const auto& [key, value] : detail.items()) {
    std::string text;
    if (value.is_object()) {
      std::string inner = DetailText(value, prefix + key + ".");
      if (!inner.empty()) out += (out.empty() ? "" : " ") + inner;
      continue;
    }
    if (value.is_number_float()) {
      text = fmt::format("{:.6f}", value.get<double>());
      while (text.back() == '0') text.pop_back();
      if (text.back() == '.') text.pop_back();
    } else if (value.is_string()) {
      text = value.get<std::string>();
    } else {
      text = value.dump();
    }
    out += (out.empty() ? "" : " ") + prefix + key + "=" + text;
  }
  return out;
}

std::string DisplayId(const Row& row) {
  const nlohmann::json& j = *row.item;
  if (row.tasks.empty()) return j.value("id", "");
  if (row.tasks.size() == 1) return fmt::format("{}_{}", j.value("array_job_id", ""), row.tasks[0]);
  std::vector<int> tasks = row.tasks;
  std::sort(tasks.begin(), tasks.end());
  return fmt::format("{}_[{}]", j.value("array_job_id", ""), FormatTaskList(tasks));
}

std::string Request(const nlohmann::json& spec) {
  std::string sharing = spec.value("sharing", "exclusive");
  std::string what;
  if (sharing == "mig") {
    what = "mig " + spec.value("mig_profile", "");
  } else if (sharing == "exclusive") {
    what = fmt::format("{} gpu", spec.value("gpus", 1));
  } else {
    what = fmt::format("{:g} gpu {}", spec.value("gpu_milli", 0) / 1000.0, sharing);
  }
  if (spec.contains("gpu_types")) {
    std::string types;
    for (const auto& t : spec["gpu_types"]) types += (types.empty() ? "" : "|") + t.get<std::string>();
    what += " " + types;
  }
  return what;
}

std::string Trim(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 1) + "~";
  return s;
}

}  // namespace

bool PrintActedOn(std::ostream& out, const nlohmann::json& answer, const char* done, const char* note) {
  if (!answer.contains("acted_on")) return false;
  const nlohmann::json& a = answer["acted_on"];
  std::vector<std::string> states;
  const nlohmann::json counts = a.value("states", nlohmann::json::object());
  for (const auto& [state, count] : counts.items()) {
    states.push_back(fmt::format("{} {}", count.get<int>(), state));
  }
  out << fmt::format("array {}: {} {} of {} tasks ({}); now {}\n", Str(a, "named"), done, Str(a, "changed"),
                     Str(a, "tasks"), note, fmt::join(states, ", "));
  return true;
}

std::string ShownJobId(const nlohmann::json& job) {
  if (!job.contains("array_job_id")) return job.value("id", "");
  return fmt::format("{}_{}", job.value("array_job_id", ""), job.value("array_task_id", 0));
}

std::string PlacementSummary(const nlohmann::json& placement) {
  std::string out;
  for (const auto& ns : placement) {
    std::string gpus;
    for (const auto& g : ns["gpus"]) {
      gpus += (gpus.empty() ? "" : ",") + std::to_string(g.value("index", 0));
      if (g.contains("mig_profile")) gpus += ":" + g["mig_profile"].get<std::string>();
    }
    out += (out.empty() ? "" : " ") + fmt::format("{}[{}]", ns.value("node", ""), gpus);
  }
  return out;
}

void PrintJobs(std::ostream& out, const nlohmann::json& body, const TimeStyle& style) {
  if (body["jobs"].empty()) {
    out << "(no jobs)\n";
    return;
  }
  // Tasks in one row share their state, reason and hold, and whether they ran (a cancelled
  // array's tasks that ran, and were billed, are not hidden among those that never started).
  auto same = [](const nlohmann::json& j) {
    return j.contains("placement") ? ""
                                   : Str(j, "state") + "\n" + Str(j, "reason") + "\n" + Str(j, "held") + "\n" +
                                         (Str(j, "started_at").empty() ? "" : "ran");
  };
  std::vector<Row> rows = GroupTasks(body["jobs"], same);
  // Columns as wide as what they hold (names are cut only past 40 characters).
  size_t id = 2, name = 4, user = 4, team = 4, request = 7;
  for (const Row& row : rows) {
    const nlohmann::json& j = *row.item;
    id = std::max(id, DisplayId(row).size());
    name = std::max(name, std::min<size_t>(Str(j, "name").size(), 40));
    user = std::max(user, std::min<size_t>(Str(j, "user").size(), 40));
    team = std::max(team, std::min<size_t>(Str(j, "team").size(), 40));
    request = std::max(request, std::min<size_t>(Request(j["spec"]).size(), 40));
  }
  auto line = [&](const std::string& i, const std::string& n, const std::string& u, const std::string& t,
                  const std::string& p, const std::string& s, const std::string& r, const std::string& submitted,
                  const std::string& started, const std::string& elapsed, const std::string& where) {
    out << fmt::format("{:<{}} {:<{}} {:<{}} {:<{}} {:<8} {:<10} {:<{}} {:>9} {:>9} {:>8}  {}\n", i, id, Trim(n, name),
                       name, Trim(u, user), user, Trim(t, team), team, p, s, Trim(r, request), request, submitted,
                       started, elapsed, where);
  };
  line("ID", "NAME", "USER", "TEAM", "PRIORITY", "STATE", "REQUEST", "SUBMITTED", "STARTED", "ELAPSED", "WHERE / WHY");
  for (const Row& row : rows) {
    const nlohmann::json& j = *row.item;
    std::string where = j.contains("placement") ? PlacementSummary(j["placement"]) : Str(j, "reason");
    if (j.contains("estimated_start")) where += "; starts " + Age(Str(j, "estimated_start"), style);
    line(DisplayId(row), Str(j, "name"), Str(j, "user"), Str(j, "team"), Str(j, "priority"), Str(j, "state"),
         Request(j["spec"]), Age(Str(j, "submitted_at"), style), Age(Str(j, "started_at"), style), Elapsed(j, style),
         where);
  }
}

void PrintJob(std::ostream& out, const nlohmann::json& j, const nlohmann::json& events, const TimeStyle& style) {
  auto when = [&](const char* key) {
    return fmt::format("{} ({})", ShowTime(Str(j, key), style), Age(Str(j, key), style));
  };
  if (j.contains("array")) {  // an array's own id: the array, then its first task
    const nlohmann::json& a = j["array"];
    std::vector<std::string> states;
    const nlohmann::json counts = a.value("states", nlohmann::json::object());
    for (const auto& [state, count] : counts.items()) {
      states.push_back(fmt::format("{} {}", count.get<int>(), state));
    }
    out << fmt::format("array {}: {} tasks {}_[{}]: {}{}\n", Str(a, "job_id"), Str(a, "tasks"), Str(a, "job_id"),
                       Str(a, "task_ids"), fmt::join(states, ", "),
                       a.contains("limit") ? fmt::format(" (at most {} at once)", Str(a, "limit")) : "");
    out << fmt::format("  (below: its task {}; gantry job {}_N for another, gantry jobs for them all)\n", ShownJobId(j),
                       Str(a, "job_id"));
  }
  out << fmt::format("job {} {}\n", ShownJobId(j), j.value("name", "").empty() ? "" : "(" + Str(j, "name") + ")");
  out << fmt::format("  state      {}{}\n", Str(j, "state"), j.contains("reason") ? ": " + Str(j, "reason") : "");
  out << fmt::format("  owner      {} / {}{}\n", Str(j, "user"), Str(j, "team"),
                     j.value("project", "").empty() ? "" : " / " + Str(j, "project"));
  out << fmt::format("  priority   {}\n  request    {}\n", Str(j, "priority"), Request(j["spec"]));
  // scontrol show job's TimeLimit and WorkDir.
  const nlohmann::json& asked = j["spec"];
  if (asked.contains("time_limit_s")) {
    out << fmt::format("  time limit {}\n", FormatDuration(asked.value("time_limit_s", int64_t{0}) * kSecondMs));
  }
  if (asked.contains("working_dir")) out << fmt::format("  workdir    {}\n", Str(asked, "working_dir"));
  out << fmt::format("  submitted  {}\n", when("submitted_at"));
  if (!Str(j, "started_at").empty()) out << fmt::format("  started    {}\n", when("started_at"));
  if (!Str(j, "ended_at").empty()) out << fmt::format("  ended      {}\n", when("ended_at"));
  if (!Elapsed(j, style).empty()) out << fmt::format("  elapsed    {}\n", Elapsed(j, style));
  if (j.contains("placement")) {
    out << fmt::format("  placement  {}{}\n", PlacementSummary(j["placement"]),
                       j.contains("sharing") && Str(j, "sharing") != "exclusive" ? " (" + Str(j, "sharing") + ")" : "");
    // The devices themselves (CUDA_VISIBLE_DEVICES inside the job), as nvidia-smi -L names them.
    for (const auto& ns : j["placement"]) {
      for (const auto& g : ns.value("gpus", nlohmann::json::array())) {
        if (!Str(g, "uuid").empty()) {
          out << fmt::format("  GPU        {}:{} {}\n", Str(ns, "node"), Str(g, "index"), Str(g, "uuid"));
        }
      }
    }
  }
  for (const auto& u : j.value("gpu_use", nlohmann::json::array())) {
    double share = u.value("share", 1.0);
    std::string of_share =
        share < 1 ? fmt::format(" = {:.0f}% of its {:g} share", u.value("share_used_pct", 0.0), share) : "";
    std::string source = Str(u, "source") == "gpu" && share < 1 ? " (the whole GPU's reading, an upper bound)" : "";
    out << fmt::format("  GPU use    {} GPU {}: SM {:.0f}%{} (average {:.0f}%), {} MiB{}\n", Str(u, "node"),
                       Str(u, "gpu"), u.value("sm_util_pct", 0.0), of_share, u.value("avg_share_used_pct", 0.0),
                       Str(u, "memory_used_mib"), source);
  }
  for (const auto& p : j.value("ports", nlohmann::json::array())) {
    out << (Str(p, "name") == "master"
                ? fmt::format("  master     {}:{} (MASTER_ADDR:MASTER_PORT)\n", Str(p, "address"), Str(p, "port"))
            : p.contains("proxy_url")
                ? fmt::format("  port       {} {} (through the server; on the node: {})\n", Str(p, "name"),
                              Str(p, "proxy_url"), Str(p, "url"))
                : fmt::format("  port       {} {} (on {})\n", Str(p, "name"), Str(p, "url"), Str(p, "node")));
  }
  if (j.contains("exit_code")) out << fmt::format("  exit code  {}\n", Str(j, "exit_code"));
  out << fmt::format("  runs       {} (evicted {} times)\n", Str(j, "runs"), Str(j, "evictions"));
  if (j.contains("cost")) {
    std::string limit =
        j["spec"].contains("cost_limit") ? fmt::format(" of a {} limit", Str(j["spec"], "cost_limit")) : "";
    out << fmt::format("  cost       {:.2f} {}{}{}\n", j.value("cost", 0.0), Str(j, "currency"), limit,
                       j.value("idle", false) ? "  (flagged idle: its GPUs are not used)" : "");
  }
  const nlohmann::json& spec = j["spec"];
  if (spec.contains("command")) out << fmt::format("  command    {}\n", spec["command"].get<std::string>());
  if (spec.contains("container_image")) out << fmt::format("  container  {}\n", Str(spec, "container_image"));
  if (spec.contains("notify") || spec.contains("webhook") || spec.contains("mail_user")) {
    std::string to = Str(spec, "mail_user");
    if (spec.contains("webhook")) to += (to.empty() ? "" : ", ") + Str(spec, "webhook");
    std::string events_told;
    for (const auto& e : spec.value("notify", nlohmann::json::array())) {
      events_told += (events_told.empty() ? "" : ",") + e.get<std::string>();
    }
    out << fmt::format("  notify     {} to {}\n", events_told.empty() ? "end" : events_told, to.empty() ? "-" : to);
  }
  out << "  history\n";
  for (const auto& e : events["events"]) {
    out << fmt::format("    {}  {:<10} {}\n", ShowTime(Str(e, "at"), style), Str(e, "kind"), DetailText(e["detail"]));
  }
}

void PrintQueue(std::ostream& out, const nlohmann::json& body, const std::string& only_id, const TimeStyle& style) {
  if (!only_id.empty()) {
    auto is = [&](const nlohmann::json& q) {
      return Str(q, "id") == only_id ||
             (q.contains("array_job_id") && Str(q, "array_job_id") + "_" + Str(q, "array_task_id") == only_id);
    };
    // An array's id: each of its waiting tasks (the id is also its first task's, which may run).
    // Those kept out of the queue (held, its array's limit, a dependency) too, with why.
    std::vector<const nlohmann::json*> tasks, kept_out;
    for (const auto& q : body["queue"]) {
      if (q.contains("array_job_id") && Str(q, "array_job_id") == only_id) tasks.push_back(&q);
    }
    const nlohmann::json blocked_now = body.value("blocked", nlohmann::json::array());  // kept_out points into it
    for (const auto& b : blocked_now) {
      if (b.contains("array_job_id") && Str(b, "array_job_id") == only_id) kept_out.push_back(&b);
    }
    if (!tasks.empty() || !kept_out.empty()) {
      out << fmt::format("array {}: {} task(s) waiting", only_id, tasks.size());
      out << (kept_out.empty() ? "\n" : fmt::format(", {} kept out of the queue\n", kept_out.size()));
      for (size_t i = 0; i < tasks.size() && i < 20; ++i) {
        const nlohmann::json& q = *tasks[i];
        out << fmt::format("  {}: position {}, waiting {}: {}{}\n", ShownJobId(q), Str(q, "position"),
                           FormatDuration(q.value("waiting_s", int64_t{0}) * kSecondMs), Str(q, "reason"),
                           q.contains("estimated_start") ? "; starts " + Age(Str(q, "estimated_start"), style) : "");
      }
      if (tasks.size() > 20) out << fmt::format("  ... and {} more (gantry queue lists them)\n", tasks.size() - 20);
      auto same = [](const nlohmann::json& b) { return Str(b, "reason"); };
      nlohmann::json listed = nlohmann::json::array();  // the rows point into it
      for (const nlohmann::json* b : kept_out) listed.push_back(*b);
      for (const Row& row : GroupTasks(listed, same)) {
        out << fmt::format("  {}: {}\n", DisplayId(row), Str(*row.item, "reason"));
      }
      return;
    }
    for (const auto& q : body["queue"]) {
      if (!is(q)) continue;
      out << fmt::format("job {}: position {} in the queue, waiting {}\n", only_id, Str(q, "position"),
                         FormatDuration(q.value("waiting_s", int64_t{0}) * kSecondMs));
      out << fmt::format("  why:  {} ({})\n", Str(q, "reason"), Str(q, "code"));
      if (q.contains("estimated_start")) {
        out << fmt::format("  estimated start: {} ({})\n", ShowTime(Str(q, "estimated_start"), style),
                           Age(Str(q, "estimated_start"), style));
      }
      return;
    }
    for (const auto& s : body["starting_next_cycle"]) {
      if (s.get<std::string>() == only_id) {
        out << "job " << only_id << " fits now and starts at the next cycle\n";
        return;
      }
    }
    for (const auto& h : body.value("blocked", nlohmann::json::array())) {
      if (is(h)) {
        out << fmt::format("job {}: {}\n", only_id, Str(h, "reason"));
        return;
      }
    }
    out << "job " << only_id << " is not waiting (see gantry job " << only_id << ")\n";
    return;
  }
  out << fmt::format("{:<4} {:<12} {:<10} {:<10} {:<8} {:>6} {:>8}  {}\n", "POS", "ID", "TEAM", "USER", "PRIORITY",
                     "GPUS", "WAITED", "WHY (ESTIMATED START)");
  auto same = [](const nlohmann::json& q) { return Str(q, "code") + "\n" + Str(q, "reason"); };
  for (const Row& row : GroupTasks(body["queue"], same)) {
    const nlohmann::json& q = *row.item;
    std::string why = Str(q, "reason");
    if (q.contains("estimated_start") && why.find(Str(q, "estimated_start")) == std::string::npos) {
      why += " (starts by " + ShowTime(Str(q, "estimated_start"), style) + ", " +
             Age(Str(q, "estimated_start"), style) + ")";
    }
    out << fmt::format("{:<4} {:<12} {:<10} {:<10} {:<8} {:>6.3g} {:>8}  {}\n", Str(q, "position"), DisplayId(row),
                       Trim(Str(q, "team"), 10), Trim(Str(q, "user"), 10), Str(q, "priority"), q.value("gpus", 0.0),
                       FormatDuration(q.value("waiting_s", int64_t{0}) * kSecondMs), why);
  }
  if (body["queue"].empty()) out << "(no job waits)\n";
  const nlohmann::json blocked = body.value("blocked", nlohmann::json::array());  // rows point into it
  for (const Row& row : GroupTasks(blocked, same)) {
    const nlohmann::json& h = *row.item;
    out << fmt::format("{:<4} {:<12} {:<10} {:<10} {:<8} {:>6} {:>8}  {}\n", "-", DisplayId(row),
                       Trim(Str(h, "team"), 10), Trim(Str(h, "user"), 10), Str(h, "priority"), "", "",
                       Str(h, "reason"));
  }
}

void PrintNodes(std::ostream& out, const nlohmann::json& body) {
  out << fmt::format("{:<16} {:<9} {:<12} {:>4} {:>5}  {}\n", "NODE", "STATE", "GPU TYPE", "GPUS", "IDLE",
                     "GPU: JOBS (other: another team's; ! fenced, x unhealthy; [mig PROFILE@SLICE])");
  for (const auto& n : body["nodes"]) {
    int idle = 0;
    std::string gpus;
    for (const auto& g : n["gpus"]) {
      // Another team's jobs come as shares without a name: busy, not idle.
      const nlohmann::json shares = g.value("shares", nlohmann::json::array());
      int others = 0;
      for (const auto& share : shares) others += share.contains("job") ? 0 : 1;
      bool empty = g["jobs"].empty() && others == 0;
      bool usable = g.value("healthy", true) && !g.value("fenced", false);
      if (empty && usable) ++idle;
      std::string jobs;
      for (const auto& id : g["jobs"]) jobs += (jobs.empty() ? "" : "+") + id.get<std::string>();
      if (others > 0) jobs += std::string(jobs.empty() ? "" : "+") + "other";
      std::string mig;  // a MIG GPU's instances: profile@first slice
      for (const auto& m : g.value("mig_instances", nlohmann::json::array())) {
        mig += fmt::format("{}{}@{}", mig.empty() ? "" : ",", Str(m, "profile"), m.value("start", 0));
      }
      if (g.value("mig_enabled", false)) mig = "[mig " + (mig.empty() ? "empty" : mig) + "]";
      gpus += fmt::format("{}{}{}:{}{} ", g.value("index", 0), g.value("fenced", false) ? "!" : "",
                          g.value("healthy", true) ? "" : "x", jobs.empty() ? "-" : jobs, mig);
    }
    out << fmt::format("{:<16} {:<9} {:<12} {:>4} {:>5}  {}\n", Str(n, "id"), Str(n, "state"), Str(n, "gpu_type"),
                       n["gpus"].size(), idle, gpus);
  }
}

void PrintPools(std::ostream& out, const nlohmann::json& body) {
  if (!body.value("enabled", false)) {
    out << "no node pools (write pools.yaml in the server's config directory: docs/AUTOSCALING.md)\n";
    return;
  }
  out << fmt::format("{:<18} {:<9} {:<12} {:>5} {:>5} {:>5} {:>9} {:>9} {:>8}  {}\n", "POOL", "CAPACITY", "GPU TYPE",
                     "BUSY", "IDLE", "ASKED", "MIN..MAX", "GPUS/NODE", "$/GPU-H", "NOW");
  std::string errors;
  for (const auto& p : body["pools"]) {
    int asked = static_cast<int>(p["awaited"].size()) + p.value("scale_up_running", 0);
    std::string now;
    if (p.value("scale_up_running", 0) > 0)
      now += fmt::format("scale-up of {} running; ", p.value("scale_up_running", 0));
    if (p.value("scale_down_running", false)) now += "scale-down running; ";
    if (p.contains("no_capacity_s")) now += fmt::format("no spot capacity for {} s; ", p.value("no_capacity_s", 0));
    if (!p.value("scaled", true)) now += "not scaled (no hooks); ";
    if (!now.empty()) now.resize(now.size() - 2);
    out << fmt::format("{:<18} {:<9} {:<12} {:>5} {:>5} {:>5} {:>9} {:>9} {:>8.2f}  {}\n", Str(p, "name"),
                       Str(p, "capacity"), Str(p, "gpu_type"), p["busy_nodes"].size(), p["idle_nodes"].size(), asked,
                       fmt::format("{}..{}", p.value("min_nodes", 0), p.value("max_nodes", 0)),
                       p.value("gpus_per_node", 0), p.value("price_per_gpu_hour", 0.0), now.empty() ? "-" : now);
    if (p.contains("last_error")) {
      errors += fmt::format("{}: {} ({} s ago; next try in {} s)\n", Str(p, "name"), Str(p, "last_error"),
                            p.value("last_error_s_ago", 0), p.value("next_try_in_s", 0));
    }
  }
  if (!errors.empty()) out << "\nlast failures:\n" << errors;
}

void PrintCluster(std::ostream& out, const nlohmann::json& b) {
  out << fmt::format("GPUs: {} total, {} idle, {:.2f} allocated (utilization {:.0f}%)\n", b.value("total_gpus", 0),
                     b.value("available_gpus", 0), b.value("allocated_gpus", 0.0), 100 * b.value("utilization", 0.0));
  out << fmt::format("jobs: {} running, {} queued; nodes: {} ({} schedulable)\n", b.value("running", 0),
                     b.value("queued", 0), b.value("nodes", 0), b.value("nodes_schedulable", 0));
  out << fmt::format("{:<14} {:>6} {:>6} {:>10}\n", "GPU TYPE", "TOTAL", "IDLE", "ALLOCATED");
  for (const auto& [type, c] : b["by_type"].items()) {
    out << fmt::format("{:<14} {:>6} {:>6} {:>10.2f}\n", type, c.value("total", 0), c.value("available", 0),
                       c.value("allocated", 0.0));
  }
  if (!b["allocated_by_team"].empty()) {
    out << "allocated by team:";
    for (const auto& [team, v] : b["allocated_by_team"].items())
      out << fmt::format(" {} {:.2f}", team, v.get<double>());
    out << "\n";
  }
}

void PrintAudit(std::ostream& out, const nlohmann::json& body, const TimeStyle& style) {
  // One record a line, whatever its fields hold: a line break in one (a command's word, a
  // path) is shown as \n, never as a record of its own; control characters as ^X.
  auto line = [](std::string text) {
    std::string out;
    for (char c : text) {
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else {
        out += c;
      }
    }
    return TerminalSafe(out);
  };
  for (const auto& a : body["audit"]) {
    out << fmt::format("{}  {:<10} {:<10} {:<36} {:<10} {} {}\n", ShowTime(Str(a, "at"), style),
                       line(Trim(Str(a, "user"), 10)), line(Str(a, "role")), line(Trim(Str(a, "action"), 36)),
                       line(Str(a, "target")), line(Str(a, "status")), line(Str(a, "detail")));
  }
}

}  // namespace gantry
