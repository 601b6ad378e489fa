// Runs the built `gantry` binary (or any command) from a test and captures its stdout.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <string>

namespace gantry::testing {

// Runs `cmd` through the shell; fills `out` with its stdout; returns its exit status.
inline int RunCommand(const std::string& cmd, std::string* out) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe.get())) > 0) out->append(buf, n);
  int status = pclose(pipe.release());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace gantry::testing
