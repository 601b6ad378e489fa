// Client subcommands.
#include "client/commands.h"

#include <fmt/format.h>
#include <openssl/rand.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <thread>

#include "client/billing_commands.h"
#include "client/http_client.h"
#include "client/job_edit_commands.h"
#include "client/jobs_file.h"
#include "client/tables.h"
#include "core/encoding.h"
#include "core/yaml_util.h"

namespace gantry {

namespace {

struct SubmitFlags {
  std::string file, jobs_file, profile, name, project, priority, sharing, mig, time_limit, estimate, workdir, key;
  std::string user, team, array, dependency;
  int gpus = -1, cpus = -1, nodes = -1;
  double fraction = -1, memory_gb = -1, gpu_memory_gb = -1, cost_limit = -1;
  std::vector<std::string> gpu_types, env, command;
  bool checkpointable = false, not_preemptible = false;
};

std::string RandomKey() {
  unsigned char b[12];
  RAND_bytes(b, sizeof(b));
  std::string k;
  for (unsigned char c : b) k += fmt::format("{:02x}", c);
  return k;
}

// Profile, then file, then flags: later ones override earlier ones field by field.
Expected<YAML::Node> BuildSpec(const SubmitFlags& f, const ClientConfig& cfg) {
  YAML::Node spec(YAML::NodeType::Map);
  if (!f.profile.empty()) {
    auto text = ReadTextFile(cfg.profiles);
    if (!text) return Status::Invalid("profile", "no profiles file at " + cfg.profiles + " (set GANTRY_PROFILES)");
    auto loaded = LoadYaml(*text, cfg.profiles);
    if (!loaded) return loaded.status();
    YAML::Node all = *loaded;
    YAML::Node p = all["profiles"] ? all["profiles"][f.profile] : YAML::Node();
    if (!p || !p.IsMap())
      return Status::Invalid("profile", fmt::format("no profile '{}' in {}", f.profile, cfg.profiles));
    for (const auto& kv : p) spec[kv.first.as<std::string>()] = kv.second;
  }
  if (!f.file.empty()) {
    auto text = ReadTextFile(f.file);
    if (!text) return text.status();
    auto loaded = LoadYaml(*text, f.file);
    if (!loaded) return loaded.status();
    YAML::Node file = *loaded;
    if (!file.IsMap()) return Status::Invalid(f.file, "a job file holds one map of fields");
    for (const auto& kv : file) spec[kv.first.as<std::string>()] = kv.second;
  }
  auto set = [&](const char* key, const auto& value) { spec[key] = value; };
  if (!f.name.empty()) set("name", f.name);
  if (!f.user.empty()) set("user", f.user);
  if (!f.team.empty()) set("team", f.team);
  if (!f.project.empty()) set("project", f.project);
  if (!f.priority.empty()) set("priority", f.priority);
  if (f.gpus >= 0 || f.fraction >= 0 || !f.mig.empty()) {
    spec.remove("gpus");
    spec.remove("gpu_fraction");
    spec.remove("gpu_milli");
    spec.remove("mig_profile");
  }
  if (f.gpus >= 0) set("gpus", f.gpus);
  if (f.fraction >= 0) set("gpu_fraction", f.fraction);
  if (!f.mig.empty()) set("mig_profile", f.mig);
  if (!f.sharing.empty()) set("sharing", f.sharing);
  if (!f.gpu_types.empty()) set("gpu_types", f.gpu_types);
  if (f.cpus >= 0) set("cpus", f.cpus);
  if (f.nodes >= 0) set("nodes", f.nodes);
  if (f.memory_gb >= 0) set("memory_gb", f.memory_gb);
  if (f.gpu_memory_gb >= 0) set("gpu_memory_gb", f.gpu_memory_gb);
  // A flag replaces the file's time in either spelling (time_limit or time_limit_s).
  if (!f.time_limit.empty()) spec.remove("time_limit_s"), set("time_limit", f.time_limit);
  if (!f.estimate.empty()) spec.remove("estimated_duration_s"), set("estimated_duration", f.estimate);
  if (!f.workdir.empty()) set("working_dir", f.workdir);
  if (!f.array.empty()) set("array", f.array);
  if (!f.dependency.empty()) set("dependency", f.dependency);
  if (f.cost_limit >= 0) set("cost_limit", f.cost_limit);
  if (f.checkpointable) set("checkpointable", true);
  if (f.not_preemptible) set("preemptible", false);
  for (const std::string& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return Status::Invalid("env", "expected NAME=VALUE, got '" + kv + "'");
    spec["env"][kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!f.command.empty()) {
    std::string cmd;
    for (const std::string& a : f.command)
      cmd += (cmd.empty() ? "" : " ") + (f.command.size() == 1 ? a : ShellQuote(a));
    set("command", cmd);
  }
  return spec;
}

// Posts one spec; a lost connection is retried with the same Idempotency-Key.
Expected<HttpAnswer> PostJob(ApiClient& api, const std::string& body, const std::string& key) {
  Expected<HttpAnswer> a = Status::Internal("not sent");
  for (int attempt = 0; attempt < 3; ++attempt) {
    a = api.Post("/v1/jobs", body, "application/yaml", {{"Idempotency-Key", key}});
    if (a) return a;
    std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
  }
  return a;
}

}  // namespace

std::vector<const char*> SplitAtDashes(int argc, const char* const* argv, std::vector<std::string>* after) {
  std::vector<const char*> before;
  int i = 0;
  for (; i < argc && std::string_view(argv[i]) != "--"; ++i) before.push_back(argv[i]);
  for (++i; i < argc; ++i) after->push_back(argv[i]);
  return before;
}

std::shared_ptr<ClientCommands> AddClientCommands(CLI::App& app, std::ostream& out, std::ostream& err) {
  auto cmds = std::make_shared<ClientCommands>();
  auto cfg = std::make_shared<ClientConfig>();
  auto output = std::make_shared<std::string>("text");
  auto chosen = std::make_shared<std::function<int()>>();
  cmds->run = [chosen] { return *chosen ? (*chosen)() : -1; };

  auto common = [&, cfg, output](CLI::App* c) {
    c->add_option("--server", cfg->server, "Server address (or GANTRY_SERVER, ~/.config/gantry/config.yaml)");
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
    if (a->status >= 300) {
      err << "gantry: " << DescribeError(*a) << "\n";
      return 1;
    }
    if (*output == "json") {
      out << a->body.dump(2) << "\n";
    } else {
      render(a->body);
    }
    return 0;
  };

  // submit
  auto sf = std::make_shared<SubmitFlags>();
  CLI::App* submit = app.add_subcommand("submit", "Submit a job (flags, -f job.yaml, --profile, or --jobs-file)");
  common(submit);
  submit->add_option("-f,--file", sf->file, "Job spec file (YAML or JSON)")->check(CLI::ExistingFile);
  submit->add_option("--jobs-file", sf->jobs_file, "One job per line: priority,script,conda_env,arguments,allowed_gpus")
      ->check(CLI::ExistingFile);
  submit->add_option("--profile", sf->profile, "Named job profile (profiles.yaml)");
  submit->add_option("--name", sf->name, "Job name");
  submit->add_option("--user", sf->user, "Submit for this user (team admins)");
  submit->add_option("--team", sf->team, "Team (admins)");
  submit->add_option("--project", sf->project, "Project to bill");
  submit->add_option("-p,--priority", sf->priority, "Priority class");
  submit->add_option("-g,--gpus", sf->gpus, "Whole GPUs");
  submit->add_option("--gpu-fraction", sf->fraction, "A fraction of one GPU (time-slice or MPS)");
  submit->add_option("--mig", sf->mig, "MIG profile, e.g. 3g.40gb");
  submit->add_option("--sharing", sf->sharing, "exclusive, time-slice, mps or mig");
  submit->add_option("-t,--gpu-type", sf->gpu_types, "Allowed GPU type (repeat for several)");
  submit->add_option("--gpu-memory-gb", sf->gpu_memory_gb, "Minimum GPU memory (or the MPS limit)");
  submit->add_option("--cpus", sf->cpus, "CPUs per node");
  submit->add_option("--memory-gb", sf->memory_gb, "Host memory per node");
  submit->add_option("--nodes", sf->nodes, "Spread over this many nodes");
  submit->add_option("--time-limit", sf->time_limit,
                     "e.g. 2h, 90m, 2:00:00, 1-00:00:00; a bare number is minutes (as in Slurm)");
  submit->add_option("--estimate", sf->estimate,
                     "Estimated run time, e.g. 30m (backfill starts jobs that end in time)");
  submit->add_option("--cost-limit", sf->cost_limit, "Stop the job once it has cost this much (alert at 80%)");
  submit->add_option("--workdir", sf->workdir, "Working directory (absolute)");
  submit->add_option("-e,--env", sf->env, "NAME=VALUE (repeat)");
  submit->add_flag("--checkpointable", sf->checkpointable, "The job saves and resumes from GANTRY_CHECKPOINT_DIR");
  submit->add_flag("--not-preemptible", sf->not_preemptible, "Never evict this job");
  submit->add_option("-a,--array", sf->array,
                     "A job array: 0-99, 1,5,9, 0-99:2; %8 runs at most 8 at once. Each task gets "
                     "GANTRY_ARRAY_TASK_ID (and SLURM_ARRAY_TASK_ID)");
  submit->add_option("-d,--dependency", sf->dependency,
                     "Start after other jobs: afterok:ID[:ID], afternotok:, afterany:, after:, aftercorr:ARRAY, "
                     "singleton; several joined by ','");
  submit->add_option("--idempotency-key", sf->key, "Retries with the same key never make two jobs");
  submit->add_option("command", sf->command, "The command (after --)");
  // Not the shared_ptr: cmds->run holds what this callback makes (a cycle).
  ClientCommands* parsed = cmds.get();
  submit->callback([=, &out, &err] {
    *chosen = [=, &out, &err]() -> int {
      if (Status s = ResolveClientConfig(*cfg); !s.ok()) {
        err << "gantry: " << s.ToString() << "\n";
        return 2;
      }
      if (!parsed->command.empty()) {
        if (!sf->command.empty()) {
          err << "gantry: command: give it once, after -- (found '" << sf->command.front() << "' before --)\n";
          return 2;
        }
        sf->command = parsed->command;
      }
      std::vector<std::pair<std::string, YAML::Node>> specs;  // label, spec
      if (!sf->jobs_file.empty()) {
        auto lines = ParseJobsFile(sf->jobs_file);
        if (!lines) {
          err << "gantry: " << lines.status().ToString() << "\n";
          return 2;
        }
        for (auto& l : *lines) {
          // Who and what to bill apply to every line.
          if (!sf->user.empty()) l.spec["user"] = sf->user;
          if (!sf->team.empty()) l.spec["team"] = sf->team;
          if (!sf->project.empty()) l.spec["project"] = sf->project;
          specs.emplace_back(fmt::format("{}:{}", sf->jobs_file, l.line), l.spec);
        }
      } else {
        auto spec = BuildSpec(*sf, *cfg);
        if (!spec) {
          err << "gantry: " << spec.status().ToString() << "\n";
          return 2;
        }
        specs.emplace_back("job", *spec);
      }
      // Like sbatch: a job runs where it was submitted from unless it says otherwise.
      std::error_code ec;
      std::string cwd = std::filesystem::current_path(ec).string();
      for (auto& [label, spec] : specs) {
        if (!spec["working_dir"] && !cwd.empty()) spec["working_dir"] = cwd;
      }
      ApiClient api(*cfg);
      std::string batch = RandomKey();
      int failed = 0;
      nlohmann::json all = nlohmann::json::array();
      for (size_t i = 0; i < specs.size(); ++i) {
        YAML::Emitter e;
        e << specs[i].second;
        std::string key = sf->key.empty() ? fmt::format("{}-{}", batch, i) : sf->key;
        auto a = PostJob(api, e.c_str(), key);
        if (!a || a->status >= 300) {
          ++failed;
          err << "gantry: " << specs[i].first << ": " << (a ? DescribeError(*a) : a.status().message()) << "\n";
          continue;
        }
        if (*output == "json") {
          all.push_back(a->body);
        } else {
          const nlohmann::json& j = a->body;
          if (j.contains("array")) {
            out << fmt::format("submitted array job {} ({} tasks: {}_[{}])\n", j.value("id", ""),
                               j["array"].value("tasks", 0), j.value("id", ""), j["array"].value("task_ids", ""));
          } else {
            out << fmt::format("submitted job {} ({}){}\n", j.value("id", ""), j.value("state", ""),
                               j.contains("placement") ? " on " + PlacementSummary(j["placement"]) : "");
          }
        }
      }
      if (*output == "json") out << (specs.size() == 1 && all.size() == 1 ? all[0] : all).dump(2) << "\n";
      return failed ? 1 : 0;
    };
  });

  // jobs
  auto jf = std::make_shared<std::array<std::string, 3>>();
  auto limit = std::make_shared<int>(100);
  CLI::App* jobs = app.add_subcommand("jobs", "List jobs of your team (admins: all)");
  common(jobs);
  jobs->add_option("--state", (*jf)[0], "pending, running, stopping, succeeded, failed, cancelled or active");
  jobs->add_option("--team", (*jf)[1], "Only this team");
  jobs->add_option("--user", (*jf)[2], "Only this user");
  jobs->add_option("--limit", *limit, "At most this many (newest first)");
  jobs->callback([=, &out] {
    *chosen = [=, &out] {
      std::string q = fmt::format("/v1/jobs?limit={}", *limit);
      const char* names[] = {"state", "team", "user"};
      for (int i = 0; i < 3; ++i) {
        if (!(*jf)[i].empty()) q += fmt::format("&{}={}", names[i], (*jf)[i]);
      }
      return request([q](ApiClient& a) { return a.Get(q); }, [&out](const nlohmann::json& b) { PrintJobs(out, b); });
    };
  });

  auto id = std::make_shared<std::string>();
  CLI::App* job = app.add_subcommand("job", "Show one job and its history");
  common(job);
  job->add_option("id", *id, "Job id")->required();
  job->callback([=, &out] {
    *chosen = [=, &out] {
      nlohmann::json detail;
      int rc = request([id](ApiClient& a) { return a.Get("/v1/jobs/" + *id); },
                       [&detail](const nlohmann::json& b) { detail = b; });
      if (rc != 0 || *output == "json") return rc;
      return request([id](ApiClient& a) { return a.Get("/v1/jobs/" + *id + "/events"); },
                     [&out, &detail](const nlohmann::json& b) { PrintJob(out, detail, b); });
    };
  });

  auto explain = std::make_shared<std::string>();
  CLI::App* queue = app.add_subcommand("queue", "The queue in order, with why each job waits");
  common(queue);
  queue->add_option("--explain", *explain, "Only this job, in full");
  queue->callback([=, &out] {
    *chosen = [=, &out] {
      return request([](ApiClient& a) { return a.Get("/v1/queue"); },
                     [&out, explain](const nlohmann::json& b) { PrintQueue(out, b, *explain); });
    };
  });

  auto ids = std::make_shared<std::vector<std::string>>();
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel jobs (running ones get SIGTERM, then SIGKILL)");
  common(cancel);
  cancel->add_option("ids", *ids, "Job ids")->required();
  cancel->callback([=, &out] {
    *chosen = [=, &out] {
      int rc = 0;
      for (const std::string& i : *ids) {
        rc |= request([i](ApiClient& a) { return a.Delete("/v1/jobs/" + i); },
                      [&out](const nlohmann::json& b) {
                        out << fmt::format("job {}: {}\n", b.value("id", ""), b.value("state", ""));
                      });
      }
      return rc;
    };
  });

  CLI::App* nodes = app.add_subcommand("nodes", "Nodes, their GPUs and what runs on them");
  common(nodes);
  nodes->callback([=, &out] {
    *chosen = [=, &out] {
      return request([](ApiClient& a) { return a.Get("/v1/nodes"); },
                     [&out](const nlohmann::json& b) { PrintNodes(out, b); });
    };
  });

  for (bool drain : {true, false}) {
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
          gpu = "?gpu=" + target->substr(colon + 1);
        }
        std::string path = fmt::format("/v1/nodes/{}/{}{}", node, drain ? "drain" : "undrain", gpu);
        return request([path](ApiClient& a) { return a.Post(path, "", "application/json"); },
                       [&out, target, drain](const nlohmann::json& b) {
                         out << fmt::format("{} {} (node state {})\n", *target, drain ? "drained" : "undrained",
                                            b.value("state", ""));
                       });
      };
    });
  }

  CLI::App* status = app.add_subcommand("status", "Cluster summary: GPUs by type, utilization, queue");
  common(status);
  status->callback([=, &out] {
    *chosen = [=, &out] {
      return request([](ApiClient& a) { return a.Get("/v1/cluster"); },
                     [&out](const nlohmann::json& b) { PrintCluster(out, b); });
    };
  });

  auto follow = std::make_shared<bool>(false);
  auto use_stderr = std::make_shared<bool>(false);
  CLI::App* logs = app.add_subcommand("logs", "A job's output");
  common(logs);
  logs->add_option("id", *id, "Job id")->required();
  logs->add_flag("-f,--follow", *follow, "Keep printing until the job ends");
  logs->add_flag("--stderr", *use_stderr, "The error stream instead of stdout");
  logs->callback([=, &out, &err] {
    *chosen = [=, &out, &err]() -> int {
      if (Status s = ResolveClientConfig(*cfg); !s.ok()) {
        err << "gantry: " << s.ToString() << "\n";
        return 2;
      }
      ApiClient api(*cfg);
      int64_t offset = 0;
      for (;;) {
        auto a = api.Get(
            fmt::format("/v1/jobs/{}/logs?stream={}&offset={}", *id, *use_stderr ? "stderr" : "stdout", offset));
        if (!a || a->status != 200) {
          err << "gantry: " << (a ? DescribeError(*a) : a.status().message()) << "\n";
          return 1;
        }
        out << a->text << std::flush;
        offset = std::stoll(a->headers["X-Log-Offset"]);
        std::string state = a->headers["X-Job-State"];
        bool done = state == "succeeded" || state == "failed" || state == "cancelled";
        if (!*follow || (done && a->text.empty())) return 0;
        if (a->text.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    };
  });

  auto audit_limit = std::make_shared<int>(50);
  CLI::App* audit = app.add_subcommand("audit", "Who changed what, newest first (admins)");
  common(audit);
  audit->add_option("--limit", *audit_limit, "Records");
  audit->callback([=, &out] {
    *chosen = [=, &out] {
      return request([audit_limit](ApiClient& a) { return a.Get(fmt::format("/v1/audit?limit={}", *audit_limit)); },
                     [&out](const nlohmann::json& b) { PrintAudit(out, b); });
    };
  });

  // token: make a user's token and its users.yaml entry (the token is shown once).
  auto tu = std::make_shared<std::array<std::string, 4>>();  // user, team, role, node
  (*tu)[2] = "user";
  CLI::App* token = app.add_subcommand("token", "Create a token for a user: prints it once, and the users.yaml entry");
  token->add_option("--user", (*tu)[0], "User name")->required();
  token->add_option("--team", (*tu)[1], "Team")->required();
  token->add_option("--role", (*tu)[2], "user, team-admin, admin or agent (a node agent)")
      ->check(CLI::IsMember({"user", "team-admin", "admin", "agent"}));
  token->add_option("--node", (*tu)[3], "The one node an agent token speaks for (required with --role agent)");
  token->callback([=, &out] {
    if (((*tu)[2] == "agent") != !(*tu)[3].empty()) {
      throw CLI::ValidationError("--node", "an agent token names its one node (--node ID); other roles have none");
    }
    *chosen = [=, &out] {
      std::string t = NewToken();
      std::string node = (*tu)[3].empty() ? "" : ", node: " + (*tu)[3];
      out << "token (give it to " << (*tu)[0] << "; it is not stored anywhere): " << t << "\n"
          << "users.yaml entry:\n"
          << fmt::format("  - {{name: {}, team: {}, role: {}{}, token_sha256: {}}}\n", (*tu)[0], (*tu)[1], (*tu)[2],
                         node, Sha256Hex(t));
      return 0;
    };
  });
  AddBillingCommands(app, out, {common, request, chosen});
  AddJobEditCommands(app, out, {common, request, chosen});
  return cmds;
}

}  // namespace gantry
