// Client subcommands.
#include "client/commands.h"

#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <thread>

#include "client/billing_commands.h"
#include "client/http_client.h"
#include "client/job_edit_commands.h"
#include "client/jobs_file.h"
#include "client/login_commands.h"
#include "client/run_commands.h"
#include "client/session_commands.h"
#include "client/session_file.h"
#include "client/submit_command.h"
#include "client/tables.h"
#include "client/terminal_safe.h"
#include "core/encoding.h"
#include "core/yaml_util.h"

namespace gantry {

std::vector<const char*> SplitAtDashes(int argc, const char* const* argv, std::vector<std::string>* after) {
  std::vector<const char*> before;
  int i = 0;
  for (; i < argc && std::string_view(argv[i]) != "--"; ++i) before.push_back(argv[i]);
  for (++i; i < argc; ++i) after->push_back(argv[i]);
  return before;
}

namespace {

// squeue's reason column: pending jobs in `body` without a reason of their own get the
// queue's (why they wait and when they should start, or why they are kept out of the
// line: held, a dependency, their array's limit).
void AddQueueReasons(ApiClient& api, nlohmann::json& body) {
  std::map<std::string, nlohmann::json*> waiting;
  for (auto& j : body["jobs"]) {
    if (j.value("state", "") == "pending" && j.value("reason", "").empty()) waiting[j.value("id", "")] = &j;
  }
  if (waiting.empty()) return;
  auto queue = api.Get("/v1/queue");
  if (!queue || queue->status != 200 || !queue->body.contains("queue")) return;
  for (const char* list : {"queue", "blocked"}) {
    for (const auto& q : queue->body.value(list, nlohmann::json::array())) {
      auto it = waiting.find(q.value("id", ""));
      if (it == waiting.end()) continue;
      (*it->second)["reason"] = q.value("reason", "");
      if (q.contains("estimated_start")) (*it->second)["estimated_start"] = q["estimated_start"];
    }
  }
}

}  // namespace

std::shared_ptr<ClientCommands> AddClientCommands(CLI::App& app, std::ostream& out, std::ostream& err,
                                                  const std::string& only) {
  // Only the command named on the command line, when one is: a call then does not pay
  // for defining every command's flags (most of a quick command's start).
  auto wants = [only](std::string_view name) { return only.empty() || name == only; };
  auto cmds = std::make_shared<ClientCommands>();
  auto cfg = std::make_shared<ClientConfig>();
  auto output = std::make_shared<std::string>("text");
  auto chosen = std::make_shared<std::function<int()>>();
  cmds->run = [chosen] { return *chosen ? (*chosen)() : -1; };
  cmds->chosen = [chosen] { return static_cast<bool>(*chosen); };
  cmds->config = cfg;

  auto common = [&, cfg, output](CLI::App* c) {
    c->add_option(
        "--server", cfg->server,
        "Server address; several, comma-separated, follow the leader (or GANTRY_SERVER, ~/.config/gantry/config.yaml)");
    c->add_option("--token", cfg->token, "Bearer token (or GANTRY_TOKEN)");
    c->add_option("--token-file", cfg->token_file, "File holding the token (or GANTRY_TOKEN_FILE)");
    c->add_option("-o,--output", *output, "text or json")->check(CLI::IsMember({"text", "json"}));
  };
  // Runs a request and prints it: JSON as the server sent it, or `render` for people.
  auto request = [&out, &err, cfg, output](std::function<Expected<HttpAnswer>(ApiClient&)> send,
                                           std::function<void(const nlohmann::json&)> render) -> int {
    if (Status s = ResolveClientConfig(*cfg); !s.ok()) {
      err << "gantry: " << s.ToString() << "\n";
      return 2;
    }
    ApiClient api(*cfg);
    auto a = send(api);
    if (!a) {
      err << "gantry: " << a.status().message() << "\n";
      return 1;
    }
    if (a->status == 401 && cfg->token_from_session) {  // ended at the server: asked afresh next time
      ForgetSession(cfg->server);
      err << "gantry: " << DescribeError(*a)
          << "\n(the session is forgotten here: run the command again, or gantry login)\n";
      return 1;
    }
    if (a->status >= 300) {
      err << "gantry: " << DescribeError(*a) << "\n";
      return 1;
    }
    if (*output == "json") {
      out << JsonForTerminal(a->body) << "\n";
    } else {
      render(a->body);
    }
    return 0;
  };

  // Times show in local time unless --utc.
  auto utc = std::make_shared<bool>(false);
  auto timed = [common, utc](CLI::App* c) {
    common(c);
    c->add_flag("--utc", *utc, "Show times in UTC (default: local time)");
  };

  // jobs
  auto jf = std::make_shared<std::array<std::string, 6>>();
  auto limit = std::make_shared<int>(100);
  if (wants("jobs")) {
    CLI::App* jobs = app.add_subcommand("jobs", "List jobs of your team (admins: all)");
    timed(jobs);
    jobs->add_option("-t,--state", (*jf)[0],
                     "pending, running, stopping, succeeded, failed, cancelled or active; several joined by ',' "
                     "(Slurm's PD,R too)");
    jobs->add_option("--team", (*jf)[1], "Only this team");
    jobs->add_option("--user", (*jf)[2], "Only this user");
    jobs->add_option("-S,--since", (*jf)[3],
                     "Only jobs not ended before this: 2h (ago), 2026-11-26, '2026-11-26 14:00'");
    jobs->add_option("-E,--until", (*jf)[4], "Only jobs submitted before this (same forms)");
    jobs->add_option("-n,--name", (*jf)[5], "Only jobs with this name (several joined by ',')");
    jobs->add_option("--limit", *limit, "At most this many (newest first)");
    jobs->callback([=, &out, &err] {
      *chosen = [=, &out, &err] {
        TimeStyle style = CurrentTimeStyle(*utc);
        std::string q = fmt::format("/v1/jobs?limit={}", *limit);
        const char* names[] = {"state", "team", "user", "since", "until", "name"};
        for (int i = 0; i < 6; ++i) {
          std::string value = (*jf)[i];
          if (value.empty()) continue;
          if (i == 3 || i == 4) {
            auto when = ParseWhen(std::string("--") + names[i], value, style);
            if (!when) {
              err << "gantry: " << when.status().ToString() << "\n";
              return 2;
            }
            value = *when;
          }
          q += fmt::format("&{}={}", names[i], UrlEncode(value));
        }
        return request(
            [q](ApiClient& a) {
              auto jobs = a.Get(q);
              if (jobs && jobs->status == 200) AddQueueReasons(a, jobs->body);
              return jobs;
            },
            [&out, style](const nlohmann::json& b) { PrintJobs(out, b, style); });
      };
    });
  }

  auto id = std::make_shared<std::string>();
  if (wants("job")) {
    CLI::App* job = app.add_subcommand("job", "Show one job and its history");
    timed(job);
    job->add_option("id", *id, "Job id")->required();
    job->callback([=, &out] {
      *chosen = [=, &out] {
        nlohmann::json detail;
        int rc = request(
            [id](ApiClient& a) {
              auto job = a.Get("/v1/jobs/" + UrlEncode(*id));
              if (job && job->status == 200) {  // a pending job says why it waits, as in gantry jobs
                nlohmann::json one = {{"jobs", nlohmann::json::array({job->body})}};
                AddQueueReasons(a, one);
                job->body = one["jobs"][0];
              }
              return job;
            },
            [&detail](const nlohmann::json& b) { detail = b; });
        if (rc != 0 || *output == "json") return rc;
        return request(
            [id](ApiClient& a) { return a.Get("/v1/jobs/" + UrlEncode(*id) + "/events"); },
            [&out, &detail, utc](const nlohmann::json& b) { PrintJob(out, detail, b, CurrentTimeStyle(*utc)); });
      };
    });
  }

  auto explain = std::make_shared<std::string>();
  if (wants("queue")) {
    CLI::App* queue = app.add_subcommand("queue", "The queue in order, with why each job waits");
    timed(queue);
    queue->add_option("--explain", *explain, "Only this job, in full");
    queue->callback([=, &out, &err] {
      *chosen = [=, &out, &err] {
        // A job that does not exist (or is another team's) is an error, not "not waiting".
        if (!explain->empty() && ResolveClientConfig(*cfg).ok()) {
          auto job = ApiClient(*cfg).Get("/v1/jobs/" + UrlEncode(*explain));
          if (job && job->status == 404) {
            err << "gantry: " << DescribeError(*job) << "\n";
            return 1;
          }
        }
        return request(
            [](ApiClient& a) { return a.Get("/v1/queue"); },
            [&out, explain, utc](const nlohmann::json& b) { PrintQueue(out, b, *explain, CurrentTimeStyle(*utc)); });
      };
    });
  }

  auto ids = std::make_shared<std::vector<std::string>>();
  if (wants("cancel")) {
    CLI::App* cancel = app.add_subcommand("cancel", "Cancel jobs (running ones get SIGTERM, then SIGKILL)");
    common(cancel);
    cancel->add_option("ids", *ids, "Job ids")->required();
    cancel->callback([=, &out] {
      *chosen = [=, &out] {
        int rc = 0;
        for (const std::string& i : *ids) {
          rc |= request([i](ApiClient& a) { return a.Delete("/v1/jobs/" + UrlEncode(i)); },
                        [&out](const nlohmann::json& b) {
                          if (!PrintActedOn(out, b, "cancelled", "those not ended")) {
                            out << fmt::format("job {}: {}\n", ShownJobId(b), b.value("state", ""));
                          }
                        });
        }
        return rc;
      };
    });
  }

  if (wants("nodes")) {
    CLI::App* nodes = app.add_subcommand("nodes", "Nodes, their GPUs and what runs on them");
    common(nodes);
    nodes->callback([=, &out] {
      *chosen = [=, &out] {
        return request([](ApiClient& a) { return a.Get("/v1/nodes"); },
                       [&out](const nlohmann::json& b) { PrintNodes(out, b); });
      };
    });
  }

  if (wants("pools")) {
    CLI::App* pools =
        app.add_subcommand("pools", "Node pools: nodes busy, idle and asked for, and the autoscaler's hooks");
    common(pools);
    pools->callback([=, &out] {
      *chosen = [=, &out] {
        return request([](ApiClient& a) { return a.Get("/v1/pools"); },
                       [&out](const nlohmann::json& b) { PrintPools(out, b); });
      };
    });
  }

  for (bool drain : {true, false}) {
    if (!wants(drain ? "drain" : "undrain")) continue;
    auto target = std::make_shared<std::string>();
    CLI::App* c = app.add_subcommand(drain ? "drain" : "undrain",
                                     drain ? "Stop placing jobs on a node (NODE) or one GPU (NODE:GPU); admins"
                                           : "Return a node or GPU to service; admins");
    common(c);
    c->add_option("target", *target, "NODE or NODE:GPU")->required();
    c->callback([=, &out] {
      *chosen = [=, &out] {
        std::string node = *target, gpu;
        if (size_t colon = target->rfind(':'); colon != std::string::npos) {
          node = target->substr(0, colon);
          gpu = "?gpu=" + UrlEncode(target->substr(colon + 1));
        }
        std::string path = fmt::format("/v1/nodes/{}/{}{}", UrlEncode(node), drain ? "drain" : "undrain", gpu);
        return request([path](ApiClient& a) { return a.Post(path, "", "application/json"); },
                       [&out, target, drain](const nlohmann::json& b) {
                         out << fmt::format("{} {} (node state {})\n", *target, drain ? "drained" : "undrained",
                                            b.value("state", ""));
                       });
      };
    });
  }

  if (wants("status")) {
    CLI::App* status = app.add_subcommand("status", "Cluster summary: GPUs by type, utilization, queue");
    common(status);
    status->callback([=, &out] {
      *chosen = [=, &out] {
        return request([](ApiClient& a) { return a.Get("/v1/cluster"); },
                       [&out](const nlohmann::json& b) { PrintCluster(out, b); });
      };
    });
  }

  auto audit_limit = std::make_shared<int>(50);
  if (wants("audit")) {
    CLI::App* audit = app.add_subcommand("audit", "Who changed what, newest first (admins)");
    timed(audit);
    audit->add_option("--limit", *audit_limit, "Records");
    audit->callback([=, &out] {
      *chosen = [=, &out] {
        return request([audit_limit](ApiClient& a) { return a.Get(fmt::format("/v1/audit?limit={}", *audit_limit)); },
                       [&out, utc](const nlohmann::json& b) { PrintAudit(out, b, CurrentTimeStyle(*utc)); });
      };
    });
  }

  ClientPlumbing plumbing{common, request, chosen, cfg, output, cmds->command, wants};
  AddBillingCommands(app, out, plumbing);
  AddJobEditCommands(app, out, plumbing);
  AddRunCommands(app, out, err, plumbing);
  AddSubmitCommand(app, out, err, plumbing);
  AddLoginCommands(app, out, err, plumbing);
  AddSessionCommands(app, out, err, plumbing);
  return cmds;
}

}  // namespace gantry
