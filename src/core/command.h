// Running a short helper command (an autoscaler hook, a spot-notice probe) the way a
// daemon must: its own process group, its output captured up to a cap, and a deadline
// after which the whole group is killed. Nothing the command does can block the caller
// longer than the deadline (plus a second to reap it).
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "core/time.h"

namespace gantry {

struct CommandRequest {
  std::string command;                     // run by /bin/sh -c
  std::vector<std::string> args;           // "$1", "$2", ... of the command
  std::map<std::string, std::string> env;  // added to this process's environment
  DurationMs timeout_ms = 60 * kSecondMs;
  size_t max_output = 64 * 1024;              // bytes of stdout kept (stderr: its last 4 KiB)
  const std::atomic<bool>* cancel = nullptr;  // set: the command is killed as at its deadline
};

struct CommandResult {
  int exit_code = -1;  // the exit status, 128 + signal when killed by one, -1: did not start
  bool timed_out = false;
  std::string out;       // stdout (the first max_output bytes)
  std::string err_tail;  // the last 4 KiB of stderr
  bool out_truncated = false;
  DurationMs took_ms = 0;
  // "exit code 3", "killed after 60 s (did not finish)", "could not start: ...".
  std::string Outcome() const;
};

CommandResult RunCommand(const CommandRequest& request);

// A value fit for one line of a log or an error: control characters become spaces, and
// at most `max` characters.
std::string OneLineExcerpt(const std::string& text, size_t max = 200);

}  // namespace gantry
