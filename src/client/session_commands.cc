// gantry exec, attach and shell: the job checked first (so a refusal names the job's
// state in plain words), then the session's stream through the server.
#include "client/session_commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ostream>
#include <set>
#include <thread>

#include "client/session_client.h"
#include "client/submit_spec.h"
#include "client/time_display.h"
#include "core/encoding.h"

namespace gantry {

namespace {

std::atomic<int> g_shell_interrupts{0};
void OnShellInterrupt(int) { g_shell_interrupts.fetch_add(1); }

struct ExecFlags {
  std::string id;
  bool tty = false;
  bool no_stdin = false;
  int rank = 0;
};

// GET /v1/jobs/ID/exec?... for `command` (empty: the login shell).
std::string ExecPath(const std::string& id, const std::vector<std::string>& command, bool tty, int rank, bool end_job) {
  int cols = 80, rows = 24;
  TerminalSize(&cols, &rows);
  std::string path = fmt::format("/v1/jobs/{}/exec?tty={}&rank={}&cols={}&rows={}", UrlEncode(id),
                                 tty ? "true" : "false", rank, cols, rows);
  if (end_job) path += "&end_job=true";
  for (const std::string& word : command) path += "&command=" + UrlEncode(word);
  return path;
}

// Opens the session and runs it; the exit status of the command (or why there is none).
int RunSession(ApiClient& api, const std::string& path, const SessionIo& io, std::ostream& err) {
  auto stream = api.OpenStream(path);
  if (!stream) {
    err << "gantry: " << stream.status().message() << "\n";
    return stream.status().code() == StatusCode::kUnavailable ? 255 : 1;
  }
  return RunClientSession(**stream, io, err);
}

// Waits until job `id` runs (printing why it waits when that changes); false (having said
// why) when it ended first or Ctrl-C was pressed.
bool WaitUntilRunning(ApiClient& api, const std::string& id, std::ostream& err) {
  std::string said;
  for (;;) {
    if (g_shell_interrupts.load() > 0) return false;
    auto a = api.Get("/v1/jobs/" + UrlEncode(id));
    if (!a || a->status != 200) {
      err << "gantry: " << (a ? DescribeError(*a) : a.status().message()) << "\n";
      return false;
    }
    std::string state = a->body.value("state", "");
    if (state == "running") return true;
    if (state != "pending") {
      err << "gantry: job " << id << " is " << state << ": " << a->body.value("reason", "") << "\n";
      return false;
    }
    auto q = api.Get("/v1/queue");
    std::string why;
    if (q && q->status == 200) {
      for (const char* list : {"queue", "blocked"}) {
        for (const auto& j : q->body.value(list, nlohmann::json::array())) {
          if (j.value("id", "") != id) continue;
          why = j.value("reason", "");
          if (j.contains("estimated_start") && j["estimated_start"].is_string()) {
            // In local time with its age, once (the reason may name the time already).
            const std::string at = j["estimated_start"];
            TimeStyle style = CurrentTimeStyle(false);
            std::string shown = fmt::format("{} ({})", ShowTime(at, style), Age(at, style));
            if (size_t in = why.find(at); in != std::string::npos) {
              why.replace(in, at.size(), shown);
            } else {
              why += " (estimated start " + shown + ")";
            }
          }
        }
      }
    }
    if (why != said) {
      err << "gantry: job " << id << " waiting" << (why.empty() ? "" : ": " + why) << "\n";
      said = why;
    }
    for (int i = 0; i < 10 && g_shell_interrupts.load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// The client's configuration resolved; false after saying why.
bool Resolved(ClientConfig& cfg, std::ostream& err) {
  Status s = ResolveClientConfig(cfg);
  if (!s.ok()) err << "gantry: " << s.ToString() << "\n";
  return s.ok();
}

}  // namespace

void AddSessionCommands(CLI::App& app, std::ostream& out, std::ostream& err, const ClientPlumbing& p) {
  (void)out;
  auto cfg = p.cfg;
  auto chosen = p.chosen;
  auto command = p.command;
  const auto& wants = p.wants;

  auto ex = std::make_shared<ExecFlags>();
  if (wants("exec")) {
    CLI::App* c = app.add_subcommand(
        "exec",
        "Run a command in a running job's allocation, as the job (srun --jobid, kubectl exec): -- CMD; "
        "without one, a login shell");
    p.common(c);
    c->add_option("id", ex->id, "The job (an array task as 7_3)")->required();
    c->add_flag("-t,--tty", ex->tty, "On a terminal (the default with no command, when this is one)");
    c->add_flag("--no-stdin", ex->no_stdin, "Give the command no input (it reads end-of-file)");
    c->add_option("--rank", ex->rank, "Which of a multi-node job's nodes (its rank; default 0)");
    c->callback([=, &err] {
      *chosen = [=, &err]() -> int {
        if (!Resolved(*cfg, err)) return 2;
        const bool terminal = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
        const bool tty = (ex->tty || command->empty()) && terminal;
        if (ex->tty && !terminal) err << "gantry: exec: not on a terminal: running without one\n";
        static const std::set<std::string> kInteractive = {"bash", "sh", "zsh", "fish", "python", "python3", "ipython"};
        if (!tty && terminal && command->size() == 1 && kInteractive.count(command->front())) {
          err << "hint: no terminal for " << command->front() << ": gantry exec " << ex->id << " -t -- "
              << command->front() << " gives it a prompt and line editing\n";
        }
        ApiClient api(*cfg);
        SessionIo io{tty, !ex->no_stdin, false, ""};
        return RunSession(api, ExecPath(ex->id, *command, tty, ex->rank, false), io, err);
      };
    });
  }

  auto at = std::make_shared<ExecFlags>();
  if (wants("attach")) {
    CLI::App* c = app.add_subcommand(
        "attach", "A running job's output as it is written (sattach, kubectl attach); Ctrl-C leaves it running");
    p.common(c);
    c->add_option("id", at->id, "The job (an array task as 7_3)")->required();
    c->add_option("--rank", at->rank, "Which of a multi-node job's nodes (its rank; default 0)");
    c->callback([=, &err] {
      *chosen = [=, &err]() -> int {
        if (!Resolved(*cfg, err)) return 2;
        if (!command->empty()) {
          err << "gantry: attach: takes no command: it follows the job's own output (gantry exec " << at->id
              << " -- CMD runs one)\n";
          return 2;
        }
        ApiClient api(*cfg);
        SessionIo io{
            false, false, true,
            fmt::format("gantry: detached; job {} keeps running (gantry logs {} -f follows it)", at->id, at->id)};
        return RunSession(api, fmt::format("/v1/jobs/{}/attach?rank={}", UrlEncode(at->id), at->rank), io, err);
      };
    });
  }

  auto sf = std::make_shared<SubmitFlags>();
  if (wants("shell")) {
    CLI::App* c = app.add_subcommand(
        "shell",
        "Allocate GPUs and open a shell there (salloc / srun --pty bash); the allocation ends with the "
        "shell. -- CMD runs that instead");
    p.common(c);
    AddSubmitOptions(c, *sf);
    c->callback([=, &err] {
      *chosen = [=, &err]() -> int {
        if (!Resolved(*cfg, err)) return 2;
        SubmitFlags f = *sf;
        if (!f.file.empty() || !f.jobs_file.empty() || !f.array.empty()) {
          err << "gantry: shell: opens one allocation: give its GPUs with flags (-g, -t), not a file or an array\n";
          return 2;
        }
        // The allocation holds its GPUs until the shell ends (or its time limit, else 8 h).
        if (f.hold_gpus.empty()) f.hold_gpus = f.time_limit.empty() ? "8h" : f.time_limit;
        if (f.name.empty()) f.name = "shell";
        ApiClient api(*cfg);
        int rc = 0;
        auto job = SubmitToFollow(api, f, *cfg, err, &rc);
        if (!job) return rc;
        const std::string id = job->value("id", "");
        err << "gantry: job " << id << " submitted for the shell (" << job->value("state", "") << ")\n";
        // Ctrl-C, a closed terminal or a kill while it waits: the allocation is cancelled,
        // never left to start later with no one at it.
        g_shell_interrupts = 0;
        struct sigaction sa {};
        sa.sa_handler = OnShellInterrupt;
        sigemptyset(&sa.sa_mask);
        const int stops[3] = {SIGINT, SIGTERM, SIGHUP};
        struct sigaction old[3] = {};
        for (int i = 0; i < 3; ++i) sigaction(stops[i], &sa, &old[i]);
        bool running = WaitUntilRunning(api, id, err);
        for (int i = 0; i < 3; ++i) sigaction(stops[i], &old[i], nullptr);
        if (!running) {
          api.Delete("/v1/jobs/" + UrlEncode(id));
          err << "gantry: job " << id << " cancelled\n";
          return g_shell_interrupts.load() > 0 ? 130 : 1;
        }
        const bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
        SessionIo io{tty, true, false, ""};
        int code = RunSession(api, ExecPath(id, *command, tty, 0, true), io, err);
        // The agent ends the hold with the session; a session that never opened is cancelled here.
        std::string state, reason;
        for (int i = 0;; ++i) {
          auto job = api.Get("/v1/jobs/" + UrlEncode(id));
          state = job && job->status == 200 ? job->body.value("state", "") : "";
          reason = job && job->status == 200 ? job->body.value("reason", "") : "";
          if (state != "running" && state != "pending") break;
          if (i == 30) {
            api.Delete("/v1/jobs/" + UrlEncode(id));
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        // The hold ends as its session did (salloc's job: its command's exit status).
        const bool as_session = state == "succeeded" || (state == "failed" && code > 0);
        if (!as_session && (state == "cancelled" || state == "failed")) {
          err << "gantry: job " << id << " " << state << (reason.empty() ? "" : ": " + reason) << "\n";
        } else {
          err << "gantry: job " << id << " released its GPUs" << (code > 0 ? fmt::format(" ({})", state) : "") << "\n";
        }
        return code;
      };
    });
  }
}

}  // namespace gantry
