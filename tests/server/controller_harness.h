// A controller on a temporary SQLite file with a recording agent link and a hand-moved
// clock, for tests of job transitions, recovery and authorization without HTTP.
#pragma once

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>

#include "core/job_changes.h"
#include "core/spec_yaml.h"
#include "server/controller.h"
#include "server/http_api.h"
#include "state/state_harness.h"
#include "test_util.h"

namespace gantry::testing {

inline std::string TempPath(const std::string& name) {
  std::string dir = ::testing::TempDir() + "gantry-" + std::to_string(::getpid()) + "-" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

// Agent tests run jobs as the test's own account: on a root test run that is root, which
// the order's team policy must allow explicitly.
inline void RunAsThisAccount(StartOrder& o) {
  struct passwd* self = getpwuid(geteuid());
  o.unix_account = self ? self->pw_name : "";
  o.allow_root = true;
}

// A controller answer as the API sends it: the HTTP status (HttpStatus, the HTTP layer's
// mapping) and the body, so tests state expectations in the API's terms.
struct ApiAnswer {
  int status = 0;
  nlohmann::json body;
};
inline ApiAnswer Api(const Status& refusal) { return {HttpStatus(refusal.code()), ErrorJson(refusal)}; }
inline ApiAnswer Api(const Answer& a) { return a ? ApiAnswer{200, *a} : Api(a.status()); }
inline ApiAnswer Api(const Expected<Submitted>& s) {
  return s ? ApiAnswer{s->created ? 201 : 200, s->job} : Api(s.status());
}

// The options a test's controller starts with: the built-in config, the test users, a
// periodic cycle of an hour (tests decide when time passes), a cycle after every batch
// however slow the build (ASan), and no log.
inline ControllerOptions HarnessOptions() {
  ControllerOptions o;
  o.config = *LoadConfigDir("");
  o.tick_ms = 3600 * 1000;
  o.defer_slow_cycles = false;
  o.log = [](const std::string&) {};
  o.users = HarnessUsers();
  return o;
}

struct Harness {
  // `configure` may change the options (quotas, pricing); `start` is the clock's first time.
  explicit Harness(std::string db_path = "", DurationMs tick_ms = 3600 * 1000,
                   const std::function<void(ControllerOptions&)>& configure = {}, TimeMs start = 1'800'000'000'000)
      : db(db_path.empty() ? Fresh() : db_path), now(start) {
    ControllerOptions o = HarnessOptions();
    o.tick_ms = tick_ms;  // periodic cycle (time limits); long by default: tests decide
    o.kill_wait_ms = 5000;
    o.now = [this] { return now.load(); };
    if (configure) configure(o);
    auto store = OpenSqliteStore(db, {.synchronous_full = false});
    EXPECT_TRUE(store.ok());
    controller = std::make_unique<Controller>(std::move(o), std::move(*store));
    EXPECT_TRUE(controller->Recover().ok());
    controller->Start();
  }
  static std::string Fresh() {
    std::string p = TempPath("gantry.db");
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p + suffix);
    return p;
  }
  void Attach(std::vector<Node> nodes) { ASSERT_TRUE(controller->AttachNodes(nodes, &link).ok()); }
  // Submits a YAML/JSON spec as `who`; returns the answer.
  ApiAnswer Submit(const std::string& yaml, const Actor& who, const std::string& key = "") {
    auto spec = ParseJobSpecText(yaml);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    return Api(controller->Submit(who, *spec, key));
  }
  // A change as PATCH /v1/jobs/ID makes it: its body parsed (a refusal answers), then the change.
  ApiAnswer Update(const Actor& who, const std::string& id, const std::string& changes) {
    auto parsed = ParseJobChangesText(changes);
    return Api(parsed ? controller->Update(who, id, *parsed) : Answer(parsed.status()));
  }
  std::string State(const std::string& id, const Actor& who) {
    return Api(controller->GetJob(who, id)).body.value("state", "?");
  }

  std::string db;
  std::atomic<TimeMs> now;
  RecordingLink link;
  std::unique_ptr<Controller> controller;
};

// Ends a running job's run with `code` as its agent would report it, and lets the
// controller act on it.
inline void ExitRun(Harness& h, const std::string& id, int code) {
  ApiAnswer job = Api(h.controller->GetJob(Actor{"root", "ops", Role::kAdmin}, id));
  ASSERT_EQ(job.body["state"], "running") << id << ": " << job.body.dump();
  h.controller->RunExited(ExitReport(job.body["id"], job.body["runs"], job.body["placement"][0]["node"], code, ""));
  h.controller->Sync();
}

}  // namespace gantry::testing
