// gantry run / wait / logs: following jobs to their end. Output is read from the job's
// log endpoint by offset (nothing is lost or printed twice across polls); a job has ended
// when its state says so and nothing is left to read.
#include "client/run_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <limits>
#include <map>
#include <ostream>
#include <string_view>
#include <thread>
#include <vector>

#include "client/submit_spec.h"
#include "client/terminal_safe.h"
#include "core/duration.h"
#include "core/encoding.h"
#include "core/job.h"

namespace gantry {

namespace {

std::atomic<int> g_interrupts{0};
void OnInterrupt(int) { g_interrupts.fetch_add(1); }

// Counts Ctrl-C presses while it lives (instead of dying at the first).
class InterruptCounter {
 public:
  InterruptCounter() {
    g_interrupts = 0;
    struct sigaction sa {};
    sa.sa_handler = OnInterrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~InterruptCounter() { sigaction(SIGINT, &old_, nullptr); }
  int count() const { return g_interrupts.load(); }

 private:
  struct sigaction old_ {};
};

bool Ended(const std::string& state) { return state == "succeeded" || state == "failed" || state == "cancelled"; }

// Sleeps up to `ms`, waking early at a Ctrl-C.
void Nap(int ms, int interrupts_seen) {
  for (int waited = 0; waited < ms && g_interrupts.load() == interrupts_seen; waited += 50) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Which of the job's streams go where; whether to follow it to its end; which rank and run.
struct FollowOptions {
  std::vector<std::pair<std::string, std::ostream*>> streams;  // "stdout"/"stderr", printed to
  bool follow = true;
  bool cancel_on_interrupt = false;  // gantry run: Ctrl-C cancels the job; twice stops waiting
  int rank = -1;                     // -1: every rank, "[rank N] " before each line when several
  int run = 0;                       // 0: the latest, followed into the next after a requeue
};

// One rank's stream as it is read: the next offset, and with rank prefixes the start of a
// line that has not ended yet (printed once it has, or at the end).
struct LogCursor {
  int64_t offset = 0;
  std::string partial;
  bool cut_told = false;
};

// The header `name` as a whole number within lo..hi, into `value`; false when it is missing,
// not a number or out of range.
bool HeaderNumber(const std::map<std::string, std::string>& headers, const char* name, int64_t lo, int64_t hi,
                  int64_t* value) {
  auto it = headers.find(name);
  if (it == headers.end()) return false;
  const std::string& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size() && *value >= lo && *value <= hi;
}

// Prints `text` to `to`, each whole line after `prefix` (none: as it comes).
void PrintLines(std::ostream& to, const std::string& prefix, LogCursor& c, const std::string& text) {
  if (prefix.empty()) {
    WriteRaw(to, text);
    return;
  }
  c.partial += text;
  size_t start = 0;
  for (size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    to << prefix;
    WriteRaw(to, std::string_view(c.partial).substr(start, nl + 1 - start));
  }
  c.partial.erase(0, start);
}

// Prints a job's output until it has ended and all of it is read (without follow: until
// all there is now is read); returns the exit status (ExitStatusOf the job; 130 when a
// second Ctrl-C stopped the wait; 1 on an error).
int FollowJob(ApiClient& api, const std::string& id, const FollowOptions& o, std::ostream& err) {
  std::map<std::pair<size_t, int>, LogCursor> cursors;  // (stream, rank)
  int run = o.run, ranks = 1, handled = 0;
  auto flush = [&] {  // lines cut short at the end (only prefixed output keeps them back)
    for (auto& [where, c] : cursors) {
      if (c.partial.empty()) continue;
      std::ostream& to = *o.streams[where.first].second;
      to << fmt::format("[rank {}] ", where.second);
      WriteRaw(to, c.partial + "\n");
      c.partial.clear();
    }
  };
  for (;;) {
    bool quiet = true, restarted = false;
    std::string state;
    for (size_t s = 0; s < o.streams.size() && !restarted; ++s) {
      for (int rank = std::max(o.rank, 0); rank < (o.rank >= 0 ? o.rank + 1 : ranks) && !restarted; ++rank) {
        LogCursor& c = cursors[{s, rank}];
        std::string path = fmt::format("/v1/jobs/{}/logs?stream={}&offset={}&rank={}{}", UrlEncode(id),
                                       o.streams[s].first, c.offset, rank, run > 0 ? fmt::format("&run={}", run) : "");
        auto a = api.Get(path);
        if (!a || a->status != 200) {
          err << "gantry: " << (a ? DescribeError(*a) : a.status().message()) << "\n";
          return 1;
        }
        int served = std::atoi(a->headers["X-Log-Run"].c_str());
        if (o.run == 0 && served != run) {
          // The job was requeued and runs again: its new run's output starts from 0.
          if (run > 0) {
            flush();
            err << fmt::format("gantry: job {} runs again (run {})\n", id, served);
          }
          run = served;
          cursors.clear();
          restarted = true;
          quiet = false;
          break;
        }
        // What the server says, within what a job can be: a made-up rank count or offset
        // is an error, not two billion requests or an abort.
        int64_t said_ranks = 0, next_offset = 0;
        if (!HeaderNumber(a->headers, "X-Log-Ranks", 1, kMaxNodesPerJob, &said_ranks) ||
            !HeaderNumber(a->headers, "X-Log-Offset", 0, std::numeric_limits<int64_t>::max(), &next_offset)) {
          err << "gantry: the server's log answer is not one this client reads (X-Log-Ranks, X-Log-Offset)\n";
          return 1;
        }
        ranks = std::max(ranks, static_cast<int>(said_ranks));
        if (!a->headers["X-Log-Cut"].empty() && !c.cut_told) {
          c.cut_told = true;
          err << fmt::format(
              "gantry: the oldest {} bytes of rank {}'s {} (run {}) were cut to keep the job's log cap\n",
              a->headers["X-Log-Cut"], rank, o.streams[s].first, run);
        }
        std::string prefix = o.rank < 0 && ranks > 1 ? fmt::format("[rank {}] ", rank) : "";
        PrintLines(*o.streams[s].second, prefix, c, a->text);
        *o.streams[s].second << std::flush;
        c.offset = next_offset;
        // The state before this pass's first read: ended then, every byte was at the server
        // (it writes a job's output before it applies the exit), so this pass read it all.
        // A state from a later read could end the job between reads of two streams.
        if (state.empty()) state = a->headers["X-Job-State"];
        quiet = quiet && a->text.empty();
      }
    }
    if (!o.follow && quiet) {
      bool printed = std::any_of(cursors.begin(), cursors.end(), [](const auto& c) { return c.second.offset > 0; });
      if (state == "pending" && !printed) {
        err << fmt::format(
            "gantry: job {} is pending: it has no output yet (gantry queue --explain {} says why it waits; "
            "gantry logs -f {} waits for its output)\n",
            id, id, id);
        return 1;
      }
      // Slurm puts both streams in one file: a job that failed with nothing on stdout shows
      // the end of its stderr here, instead of an empty answer.
      if (state == "failed" && !printed && o.streams.size() == 1 && o.streams[0].first == "stdout") {
        auto e = api.Get(fmt::format("/v1/jobs/{}/logs?stream=stderr&rank={}", UrlEncode(id), std::max(o.rank, 0)));
        if (e && e->status == 200 && !e->text.empty()) {
          std::string tail = e->text.size() > 2000 ? e->text.substr(e->text.size() - 2000) : e->text;
          err << fmt::format(
              "gantry: job {} failed with nothing on stdout; the end of its stderr (gantry logs {} "
              "--stderr):\n",
              id, id);
          WriteRaw(err, tail.back() == '\n' ? tail : tail + "\n");
        }
      }
      break;
    }
    if (o.follow && Ended(state) && quiet) break;
    int pressed = g_interrupts.load();
    if (o.cancel_on_interrupt && pressed > handled) {
      if (pressed > 1) {
        err << "gantry: stopped waiting; job " << id << " is " << state << "\n";
        return 130;
      }
      handled = pressed;
      auto c = api.Delete("/v1/jobs/" + UrlEncode(id));
      err << "gantry: cancelling job " << id
          << (c && c->status < 300 ? " (Ctrl-C again to stop waiting)" : ": " + (c ? DescribeError(*c) : "")) << "\n";
    }
    if (quiet) Nap(300, pressed);
  }
  flush();
  for (const auto& [stream, to] : o.streams) *to << std::flush;
  if (!o.follow) return 0;
  auto job = api.Get("/v1/jobs/" + UrlEncode(id));
  if (!job || job->status != 200) return 1;
  return ExitStatusOf(job->body);
}

// Whether a job (or every task of an array) has ended, and how: "" while not.
std::string EndOf(const nlohmann::json& job) {
  if (job.contains("array")) {
    const nlohmann::json& states = job["array"]["states"];
    for (const char* live : {"pending", "running", "stopping"}) {
      if (states.value(live, 0) > 0) return "";
    }
    int tasks = job["array"].value("tasks", 0);
    int ok = states.value("succeeded", 0);
    return ok == tasks ? "succeeded" : fmt::format("{} of {} tasks did not succeed", tasks - ok, tasks);
  }
  std::string state = job.value("state", "");
  if (!Ended(state)) return "";
  if (state == "succeeded") return state;
  return state + (job.contains("reason") ? " (" + job["reason"].get<std::string>() + ")" : "");
}

// Polls until every job has ended (or the timeout passes: 124, as timeout(1)).
int WaitForJobs(ApiClient& api, const std::vector<std::string>& ids, DurationMs timeout_ms, std::ostream& out,
                std::ostream& err) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<bool> done(ids.size(), false);
  int rc = 0, pending = static_cast<int>(ids.size()), delay_ms = 200;
  while (pending > 0) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (done[i]) continue;
      auto a = api.Get("/v1/jobs/" + UrlEncode(ids[i]));
      if (!a || a->status != 200) {
        err << "gantry: " << ids[i] << ": " << (a ? DescribeError(*a) : a.status().message()) << "\n";
        return 1;
      }
      std::string end = EndOf(a->body);
      if (end.empty()) continue;
      done[i] = true;
      --pending;
      out << "job " << ids[i] << ": " << end << "\n" << std::flush;
      if (end != "succeeded") rc = 1;
    }
    if (pending == 0) break;
    if (timeout_ms > 0 && std::chrono::steady_clock::now() >= deadline) {
      err << "gantry: wait: " << pending << " job(s) still running after " << FormatDuration(timeout_ms) << "\n";
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    delay_ms = std::min(delay_ms * 2, 2000);
  }
  return rc;
}

}  // namespace

int ExitStatusOf(const nlohmann::json& job) {
  std::string state = job.value("state", "");
  if (state == "succeeded") return 0;
  int code = job.value("exit_code", -1);
  return state == "failed" && code > 0 && code < 256 ? code : 1;
}

void AddRunCommands(CLI::App& app, std::ostream& out, std::ostream& err, const ClientPlumbing& p) {
  auto cfg = p.cfg;
  auto chosen = p.chosen;
  auto command = p.command;
  const auto& wants = p.wants;

  auto rf = std::make_shared<SubmitFlags>();
  if (wants("run")) {
    CLI::App* run = app.add_subcommand(
        "run", "Submit a job, print its output as it runs, exit with its exit code (like srun); Ctrl-C cancels it");
    p.common(run);
    AddSubmitOptions(run, *rf);
    run->callback([=, &out, &err] {
      *chosen = [=, &out, &err]() -> int {
        if (Status s = ResolveClientConfig(*cfg); !s.ok()) {
          err << "gantry: " << s.ToString() << "\n";
          return 2;
        }
        SubmitFlags f = *rf;
        if (!command->empty()) f.command = *command;
        if (f.command.empty() && f.file.empty() && f.profile.empty()) {
          err << "gantry: run: command: give the command after --, e.g. gantry run -g 1 -- python train.py\n";
          return 2;
        }
        ApiClient api(*cfg);
        int rc = 0;
        auto job = SubmitToFollow(api, f, *cfg, err, &rc);
        if (!job) return rc;
        std::string id = job->value("id", "");
        err << "gantry: job " << id << " submitted (" << job->value("state", "") << ")\n";
        InterruptCounter interrupts;
        return FollowJob(api, id, {{{"stdout", &out}, {"stderr", &err}}, true, true}, err);
      };
    });
  }

  auto wait_ids = std::make_shared<std::vector<std::string>>();
  auto timeout = std::make_shared<std::string>();
  if (wants("wait")) {
    CLI::App* wait =
        app.add_subcommand("wait", "Block until jobs (or whole arrays) end; non-zero if one did not succeed");
    p.common(wait);
    wait->add_option("ids", *wait_ids, "Job ids (an array's id waits for all its tasks)")->required();
    wait->add_option("--timeout", *timeout, "Give up after this long (exit 124), e.g. 2h; a bare number is minutes");
    wait->callback([=, &out, &err] {
      *chosen = [=, &out, &err]() -> int {
        if (Status s = ResolveClientConfig(*cfg); !s.ok()) {
          err << "gantry: " << s.ToString() << "\n";
          return 2;
        }
        DurationMs limit = 0;
        if (!timeout->empty()) {
          auto d = ParseJobTime(*timeout);
          if (!d) {
            err << "gantry: --timeout: " << d.status().message() << "\n";
            return 2;
          }
          limit = *d;
        }
        ApiClient api(*cfg);
        return WaitForJobs(api, *wait_ids, limit, out, err);
      };
    });
  }

  auto id = std::make_shared<std::string>();
  auto follow = std::make_shared<bool>(false);
  auto use_stderr = std::make_shared<bool>(false);
  auto rank = std::make_shared<int>(-1);
  auto run_number = std::make_shared<int>(0);
  if (wants("logs")) {
    CLI::App* logs = app.add_subcommand("logs", "A job's output (-f: until it ends, exiting with its status)");
    p.common(logs);
    logs->add_option("id", *id, "Job id")->required();
    logs->add_flag("-f,--follow", *follow, "Keep printing until the job ends; exit with its exit code");
    logs->add_flag("--stderr", *use_stderr, "The error stream instead of stdout");
    logs->add_option("--rank", *rank, "One rank of a multi-node job (default: all, each line after [rank N])")
        ->check(CLI::Range(0, 65535));
    logs->add_option("--run", *run_number, "One run of a job that was requeued or retried (default: the latest)")
        ->check(CLI::Range(1, 1 << 30));
    logs->callback([=, &out, &err] {
      *chosen = [=, &out, &err]() -> int {
        if (Status s = ResolveClientConfig(*cfg); !s.ok()) {
          err << "gantry: " << s.ToString() << "\n";
          return 2;
        }
        ApiClient api(*cfg);
        // A job that only holds GPUs writes nothing: -f would wait for output that never comes.
        if (auto job = api.Get("/v1/jobs/" + UrlEncode(*id)); job && job->status == 200 && job->body.is_object()) {
          const nlohmann::json spec = job->body.value("spec", nlohmann::json::object());
          if (spec.is_object() && spec.value("command", "").empty() && spec.contains("hold_gpus_s")) {
            err << fmt::format(
                "gantry: job {} holds GPUs and runs no command: it has no output (gantry exec {} "
                "opens a shell on its GPUs)\n",
                *id, *id);
            return 1;
          }
        }
        // The chosen stream goes to stdout either way, so `gantry logs --stderr 7 > err.txt` works.
        return FollowJob(api, *id, {{{*use_stderr ? "stderr" : "stdout", &out}}, *follow, false, *rank, *run_number},
                         err);
      };
    });
  }
}

}  // namespace gantry
