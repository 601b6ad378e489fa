// gantry submit. A jobs file goes as one batch that the server takes whole or not at all;
// when it is refused, a dry run of the same batch lists every bad line.
#include "client/submit_command.h"

#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "client/jobs_file.h"
#include "client/slurm_hints.h"
#include "client/submit_spec.h"
#include "client/tables.h"
#include "client/terminal_safe.h"

namespace gantry {

namespace {

struct LabeledSpec {
  std::string label;  // "job", or "jobs.txt:4"
  YAML::Node spec;
};

// The specs a submit sends: the jobs file's lines (with who and what to bill applied to
// each), or the one job the flags, file and profile make. Each runs where it was submitted
// from unless it says otherwise, as with sbatch.
Expected<std::vector<LabeledSpec>> CollectSpecs(const SubmitFlags& f, const ClientConfig& cfg) {
  std::vector<LabeledSpec> specs;
  if (!f.jobs_file.empty()) {
    auto lines = ParseJobsFile(f.jobs_file);
    if (!lines) return lines.status();
    for (auto& l : *lines) {
      if (!f.user.empty()) l.spec["user"] = f.user;
      if (!f.team.empty()) l.spec["team"] = f.team;
      if (!f.project.empty()) l.spec["project"] = f.project;
      specs.push_back({fmt::format("{}:{}", f.jobs_file, l.line), l.spec});
    }
  } else {
    auto spec = BuildSpec(f, cfg);
    if (!spec) return spec.status();
    specs.push_back({"job", *spec});
  }
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  for (LabeledSpec& s : specs) {
    if (!s.spec["working_dir"] && !cwd.empty()) s.spec["working_dir"] = cwd;
  }
  return specs;
}

std::string Emit(const YAML::Node& node) {
  YAML::Emitter e;
  e << node;
  return e.c_str();
}

std::string BatchBody(const std::vector<LabeledSpec>& specs) {
  YAML::Node root;
  for (const LabeledSpec& s : specs) root["jobs"].push_back(s.spec);
  return Emit(root);
}

// One line per job of a dry run; returns how many were refused.
int PrintVerdicts(std::ostream& out, const nlohmann::json& body, const std::vector<LabeledSpec>& specs) {
  int refused = 0;
  for (const auto& v : body["jobs"]) {
    size_t i = v.value("index", size_t{0});
    std::string label = i < specs.size() ? specs[i].label : std::to_string(i);
    if (!v.value("ok", false)) {
      ++refused;
      const nlohmann::json& e = v["error"];
      out << fmt::format("{}: refused: {}{}\n", label, e.value("field", "").empty() ? "" : e.value("field", "") + ": ",
                         e.value("message", ""));
    } else if (v.value("would_start", false)) {
      out << fmt::format("{}: would start now on {}\n", label, PlacementSummary(v["placement"]));
    } else {
      std::string when = v.contains("estimated_start") ? " (start by " + v.value("estimated_start", "") + ")" : "";
      out << fmt::format("{}: would wait: {}{}\n", label, v.value("reason", ""), when);
    }
  }
  return refused;
}

void PrintSubmitted(std::ostream& out, const nlohmann::json& j) {
  if (j.contains("array")) {
    out << fmt::format("submitted array job {} ({} tasks: {}_[{}])\n", j.value("id", ""), j["array"].value("tasks", 0),
                       j.value("id", ""), j["array"].value("task_ids", ""));
  } else {
    out << fmt::format("submitted job {} ({}){}\n", j.value("id", ""), j.value("state", ""),
                       j.contains("placement") ? " on " + PlacementSummary(j["placement"]) : "");
  }
}

// A job with neither estimate nor time limit is planned at the default limit: backfill
// keeps GPUs free for it that long ahead, and it cannot backfill itself.
void HintWithoutTime(const YAML::Node& spec, std::ostream& err) {
  for (const char* key :
       {"time_limit", "time_limit_s", "estimated_duration", "estimated_duration_s", "hold_gpus", "hold_gpus_s"}) {
    if (spec[key]) return;
  }
  err << "hint: no --estimate or --time-limit: the scheduler plans this job at the default time limit, so it "
         "cannot backfill and may hold back others; give --estimate (e.g. --estimate 2h)\n";
}

// `gantry submit train.sh` as sbatch takes it: a script here, but no command on PATH.
void HintScriptHere(const SubmitFlags& f, std::ostream& err) {
  if (f.command.empty()) return;
  const std::string& program = f.command[0];
  if (program.find('/') != std::string::npos) return;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(program, ec)) return;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return;
  }
  err << "hint: " << program << " is a file here but no command on PATH, and a job's command is looked up on PATH: "
      << "give ./" << program << " (and chmod +x it), or sh " << program << "\n";
}

// A Slurm batch script's #SBATCH lines (before its first command, as sbatch reads them) are
// not read here: said, with the first of them, so resources are not silently left out.
void HintSbatchLines(const SubmitFlags& f, std::ostream& err) {
  if (f.command.empty()) return;
  size_t at = (f.command[0] == "sh" || f.command[0] == "bash") && f.command.size() > 1 ? 1 : 0;
  const std::string& script = f.command[at];
  std::error_code ec;
  if (!std::filesystem::is_regular_file(script, ec)) return;
  std::ifstream in(script);
  std::vector<std::string> directives;
  std::string line;
  for (int n = 0; n < 1000 && std::getline(in, line); ++n) {
    if (line.rfind("#SBATCH", 0) == 0) {
      directives.push_back(line);
    } else if (!line.empty() && line[0] != '#') {
      break;
    }
  }
  if (directives.empty()) return;
  err << "hint: gantry does not read " << script << "'s #SBATCH lines (" << directives.size()
      << "): give them as gantry submit flags (docs/SLURM.md: -G, -N, -J, --time-limit, -p as --priority...), e.g. "
      << TerminalSafe(directives[0]) << "\n";
}

// Submits; a refused jobs file is dry-run to list every bad line. Returns the exit status.
int Submit(ApiClient& api, const SubmitFlags& f, const std::vector<LabeledSpec>& specs, bool json, std::ostream& out,
           std::ostream& err) {
  bool batch = !f.jobs_file.empty();
  std::string body = batch ? BatchBody(specs) : Emit(specs[0].spec);
  auto a = PostJob(api, batch ? "/v1/jobs/batch" : "/v1/jobs", body, f.key.empty() ? RandomKey() : f.key);
  if (!a) {
    err << "gantry: " << a.status().message() << "\n";
    return 1;
  }
  if (a->status >= 300) {
    err << "gantry: " << (batch ? f.jobs_file : specs[0].label) << ": " << DescribeError(*a) << "\n";
    const nlohmann::json e = a->body.is_object() ? a->body.value("error", nlohmann::json::object()) : a->body;
    const std::string field = e.is_object() ? e.value("field", "") : "";
    // Only for a class that does not exist (400), not for one the team may not use (403).
    if (std::string hint = SlurmRefusalHint(field, f.priority);
        !batch && !f.priority.empty() && !hint.empty() && a->status == 400) {
      err << "hint: " << hint << "\n";
    }
    if (batch && a->status < 500) {
      auto dry = api.Post("/v1/jobs/batch?dry_run=true", body, "application/yaml");
      if (dry && dry->status == 200) {
        std::ostringstream lines;
        PrintVerdicts(lines, dry->body, specs);
        std::istringstream in(lines.str());
        for (std::string line; std::getline(in, line);) {
          if (line.find(": refused: ") != std::string::npos) err << "  " << line << "\n";
        }
      }
      err << "gantry: nothing was submitted\n";
    }
    return 1;
  }
  if (json) {
    out << JsonForTerminal(a->body) << "\n";
  } else if (batch) {
    for (const auto& j : a->body["jobs"]) PrintSubmitted(out, j);
  } else {
    PrintSubmitted(out, a->body);
    HintWithoutTime(specs[0].spec, err);
    HintScriptHere(f, err);
    HintSbatchLines(f, err);
    if (specs[0].spec["hold_gpus"] && !a->body.contains("array")) {
      const std::string id = a->body.value("id", "");
      err << fmt::format(
          "hint: job {} holds its GPUs: gantry exec {} opens a shell on them, gantry exec {} -- CMD "
          "runs a command there (gantry shell does the hold and the shell in one step)\n",
          id, id, id);
    }
  }
  return 0;
}

}  // namespace

void AddSubmitCommand(CLI::App& app, std::ostream& out, std::ostream& err, const ClientPlumbing& p) {
  auto cfg = p.cfg;
  auto chosen = p.chosen;
  auto command = p.command;
  auto output = p.output;
  const auto& wants = p.wants;
  auto sf = std::make_shared<SubmitFlags>();
  auto dry_run = std::make_shared<bool>(false);
  if (wants("submit")) {
    CLI::App* submit = app.add_subcommand("submit", "Submit a job (flags, -f job.yaml, --profile, or --jobs-file)");
    p.common(submit);
    AddSubmitOptions(submit, *sf);
    submit
        ->add_option("--jobs-file", sf->jobs_file, "One job per line: priority,script,conda_env,arguments,allowed_gpus")
        ->check(CLI::ExistingFile);
    submit->add_option("--idempotency-key", sf->key, "Retries with the same key never make two jobs");
    submit->add_flag("--dry-run", *dry_run, "Check and say where it would run now; submit nothing");
    submit->callback([=, &out, &err] {
      *chosen = [=, &out, &err]() -> int {
        if (Status s = ResolveClientConfig(*cfg); !s.ok()) {
          err << "gantry: " << s.ToString() << "\n";
          return 2;
        }
        SubmitFlags f = *sf;
        if (!command->empty()) {
          if (!f.command.empty()) {
            err << "gantry: command: give it once, after -- (found '" << f.command.front() << "' before --)\n";
            return 2;
          }
          f.command = *command;
        }
        auto specs = CollectSpecs(f, *cfg);
        if (!specs) {
          err << "gantry: " << specs.status().ToString() << "\n";
          return 2;
        }
        ApiClient api(*cfg);
        if (!*dry_run) return Submit(api, f, *specs, *output == "json", out, err);
        auto a = api.Post("/v1/jobs/batch?dry_run=true", BatchBody(*specs), "application/yaml");
        if (!a || a->status != 200) {
          err << "gantry: " << (a ? DescribeError(*a) : a.status().message()) << "\n";
          return 1;
        }
        if (*output == "json") {
          out << JsonForTerminal(a->body) << "\n";
          return 0;
        }
        return PrintVerdicts(out, a->body, *specs) > 0 ? 1 : 0;
      };
    });
  }
}

}  // namespace gantry
