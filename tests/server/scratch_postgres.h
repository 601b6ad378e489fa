// A throw-away PostgreSQL cluster for one test (scripts/pg-scratch.sh): started on a free
// loopback port in a temp directory, stopped and deleted when the object goes.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "command_util.h"

namespace gantry::testing {

class ScratchPostgres {
 public:
  ScratchPostgres() {
    char tmpl[] = "/tmp/gantry-pg-XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir_ = tmpl;
    std::string out;
    int rc = RunCommand(Script() + " start " + dir_ + " 2>&1", &out);
    if (rc == 0) url_ = out.substr(0, out.find('\n'));
    EXPECT_EQ(rc, 0) << "pg-scratch.sh start failed: " << out;
  }
  ~ScratchPostgres() {
    if (dir_.empty()) return;
    std::string out;
    RunCommand(Script() + " stop " + dir_ + " 2>&1", &out);
  }
  ScratchPostgres(const ScratchPostgres&) = delete;
  ScratchPostgres& operator=(const ScratchPostgres&) = delete;

  // postgresql://gantry@127.0.0.1:PORT/gantry, or empty when it did not start.
  const std::string& url() const { return url_; }
  // SIGSTOP / SIGCONT the postmaster: the database stops answering without closing connections.
  void Pause() { Control("pause"); }
  void Resume() { Control("resume"); }

 private:
  static std::string Script() { return std::string("bash " GANTRY_SOURCE_DIR "/scripts/pg-scratch.sh"); }
  void Control(const char* action) {
    std::string out;
    EXPECT_EQ(RunCommand(Script() + " " + action + " " + dir_ + " 2>&1", &out), 0) << out;
  }
  std::string dir_;
  std::string url_;
};

}  // namespace gantry::testing
