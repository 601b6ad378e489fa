// gantry hold / release / update: each posts to the job's endpoint and prints the job's
// new state; several ids are changed one by one, and the exit status is non-zero if any
// change was refused.
#include "client/job_edit_commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ostream>
#include <vector>

#include "client/tables.h"
#include "core/encoding.h"
#include "core/time.h"

namespace gantry {

namespace {

// What `gantry update` may change, as flags; empty or negative: unchanged.
struct UpdateFlags {
  std::string name;
  std::string priority;
  std::string time_limit;
  std::string estimate;
  std::vector<std::string> gpu_types;
  double cost_limit = -1;
  std::string dependency;
};

nlohmann::json Changes(const UpdateFlags& f) {
  nlohmann::json changes = nlohmann::json::object();
  if (!f.name.empty()) changes["name"] = f.name;
  if (!f.priority.empty()) changes["priority"] = f.priority;
  if (!f.time_limit.empty()) changes["time_limit"] = f.time_limit;
  if (!f.estimate.empty()) changes["estimated_duration"] = f.estimate;
  if (!f.gpu_types.empty()) changes["gpu_types"] = f.gpu_types;
  if (f.cost_limit >= 0) changes["cost_limit"] = f.cost_limit;
  if (!f.dependency.empty()) changes["dependency"] = f.dependency == "none" ? "" : f.dependency;
  return changes;
}

void PrintJobLine(std::ostream& out, const nlohmann::json& job) {
  std::string held = job.contains("held") ? fmt::format(" (held: {})", job["held"].get<std::string>()) : "";
  out << fmt::format("job {}: {}{}\n", ShownJobId(job), job.value("state", ""), held);
}

// After an update, what each changed field is now, as the server has it: "job 18
// (pending): time limit 1h30m, priority high".
void PrintChanged(std::ostream& out, const nlohmann::json& changes, const nlohmann::json& job) {
  const nlohmann::json spec = job.value("spec", nlohmann::json::object());
  auto seconds = [&](const char* key) { return FormatDuration(spec.value(key, int64_t{0}) * kSecondMs); };
  std::vector<std::string> now;
  for (const auto& [field, asked] : changes.items()) {
    if (field == "name") now.push_back("name " + job.value("name", ""));
    if (field == "priority") now.push_back("priority " + job.value("priority", ""));
    if (field == "time_limit") now.push_back("time limit " + seconds("time_limit_s"));
    if (field == "estimated_duration") now.push_back("estimate " + seconds("estimated_duration_s"));
    if (field == "gpu_types") {
      now.push_back(fmt::format("GPU types {}", fmt::join(spec.value("gpu_types", std::vector<std::string>{}), ",")));
    }
    if (field == "cost_limit") now.push_back(fmt::format("cost limit {}", spec.value("cost_limit", 0.0)));
    if (field == "dependency") {
      std::string d = spec.value("dependency", "");
      now.push_back("dependency " + (d.empty() ? std::string("none") : d));
    }
  }
  out << fmt::format("job {} ({}): {}\n", ShownJobId(job), job.value("state", ""), fmt::join(now, ", "));
}

}  // namespace

void AddJobEditCommands(CLI::App& app, std::ostream& out, const ClientPlumbing& p) {
  // Captured one by one: an action that held `p` whole would hold `chosen`, which holds it.
  auto request = p.request;
  auto chosen = p.chosen;
  for (const char* verb : {"hold", "release"}) {
    if (!p.wants(verb)) continue;
    auto ids = std::make_shared<std::vector<std::string>>();
    bool hold = std::string(verb) == "hold";
    CLI::App* c = app.add_subcommand(verb, hold ? "Keep pending jobs out of the queue until released"
                                                : "Return held jobs to the queue (an admin's hold: admins only)");
    p.common(c);
    c->add_option("ids", *ids, "Job ids")->required();
    c->callback([=, &out] {
      *chosen = [=, &out] {
        int rc = 0;
        for (const std::string& id : *ids) {
          rc |= request(
              [&](ApiClient& a) {
                return a.Post(fmt::format("/v1/jobs/{}/{}", UrlEncode(id), verb), "", "text/plain");
              },
              [&out, hold](const nlohmann::json& b) {
                const char* note = hold ? "only pending tasks are held" : "those that were held";
                if (!PrintActedOn(out, b, hold ? "held" : "released", note)) PrintJobLine(out, b);
              });
        }
        return rc;
      };
    });
  }

  if (!p.wants("update")) return;
  auto ids = std::make_shared<std::vector<std::string>>();
  auto f = std::make_shared<UpdateFlags>();
  CLI::App* update = app.add_subcommand(
      "update",
      "Change pending jobs (name, priority, limits, estimate, GPU types, dependency); a running job's time limit");
  p.common(update);
  update->add_option("ids", *ids, "Job ids")->required();
  update->add_option("--name", f->name, "Job name");
  update->add_option("-p,--priority", f->priority, "Priority class (one your team may use)");
  update->add_option("--time-limit", f->time_limit,
                     "e.g. 4h, 4:00:00, 240 (minutes); running jobs: only admins extend it");
  update->add_option("--estimate", f->estimate, "Estimated run time, e.g. 30m");
  update->add_option("-t,--gpu-type", f->gpu_types, "Allowed GPU type (repeat for several; replaces the list)");
  update->add_option("--cost-limit", f->cost_limit, "Stop the job once it has cost this much");
  update->add_option("-d,--dependency", f->dependency, "A new dependency list (afterok:ID,...); none: no dependency");
  update->callback([=, &out] {
    *chosen = [=, &out]() -> int {
      nlohmann::json changes = Changes(*f);
      if (changes.empty()) {
        out << "gantry: update: nothing to change (give --time-limit, --priority, ...)\n";
        return 2;
      }
      int rc = 0;
      for (const std::string& id : *ids) {
        rc |= request(
            [&](ApiClient& a) { return a.Patch("/v1/jobs/" + UrlEncode(id), changes.dump(), "application/json"); },
            [&out, &changes](const nlohmann::json& b) { PrintChanged(out, changes, b); });
      }
      return rc;
    };
  });
}

}  // namespace gantry
