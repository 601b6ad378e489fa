// Shared by the server benchmarks: the real `gantry server` started on loopback in a
// scratch directory, its admin token, and percentiles of measured latencies.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace gantry::bench {

using Clock = std::chrono::steady_clock;

struct Server {
  pid_t pid = -1;
  std::string address;
  std::string dir;
};

// Starts `gantry server ARGS --data-dir DIR/data --listen 127.0.0.1:0` and waits until it
// serves; `config` (users.yaml and so on) goes to DIR/config when given.
inline Server StartServer(const std::string& dir, std::vector<std::string> args, const std::string& users_yaml = "") {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/config");
  if (!users_yaml.empty()) {
    std::ofstream(dir + "/config/users.yaml") << users_yaml;
    args.insert(args.end(), {"--config", dir + "/config"});
  }
  Server s;
  s.dir = dir;
  std::string ready = dir + "/ready";
  std::fflush(stdout);
  s.pid = fork();
  if (s.pid == 0) {
    if (!freopen((dir + "/server.log").c_str(), "w", stdout) || !freopen((dir + "/server.log").c_str(), "a", stderr)) {
      _exit(127);
    }
    // GANTRY_BENCH_BINARY runs another build (an earlier commit's) under the same bench.
    const char* other = std::getenv("GANTRY_BENCH_BINARY");
    std::vector<std::string> all = {other ? other : GANTRY_BINARY,
                                    "server",
                                    "--data-dir",
                                    dir + "/data",
                                    "--listen",
                                    "127.0.0.1:0",
                                    "--ready-file",
                                    ready};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  for (int i = 0; i < 1000 && !std::filesystem::exists(ready); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream(ready) >> s.address;
  return s;
}

// The standalone admin token.
inline std::string Token(const Server& s) {
  std::string t;
  std::ifstream(s.dir + "/data/admin.token") >> t;
  return t;
}

inline void StopServer(Server& s) {
  kill(s.pid, SIGTERM);
  waitpid(s.pid, nullptr, 0);
}

inline double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace gantry::bench
