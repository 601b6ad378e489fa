// gantry: the command users type. It links the API client alone over plain HTTP (no TLS
// library, store, database drivers, agent or container code), so a `gantry submit` in a
// shell loop starts in about 2 ms. The daemon commands (server, agent, gpus, sim, demo), the
// job shim and calls to an https:// server are gantryd's: this process becomes it (exec),
// found beside this binary, with the same arguments. Both define every command, so help,
// completion and man pages are whole here.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli/command_line.h"

namespace {

// Replaces this process with gantryd beside this binary (else the one on PATH); returns
// only when neither runs, saying `why` gantryd was wanted.
int ExecDaemon(char** argv, const std::string& why) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::string beside = (self.parent_path() / "gantryd").string();
  if (!ec) ::execv(beside.c_str(), argv);
  ::execvp("gantryd", argv);
  std::cerr << "gantry: " << why << ", and gantryd is neither at " << beside << " nor on PATH (" << std::strerror(errno)
            << "): install it beside gantry\n";
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && gantry::IsDaemonCommand(argv[1]))
    return ExecDaemon(argv, std::string(argv[1]) + " is run by gantryd");
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {  // without defining any command
    std::cout << gantry::kVersionLine << "\n";
    return 0;
  }
  // A server that answers early and closes must not kill a client with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<gantry::CommandLine> line = gantry::CommandLine::ForClient(argc, argv);
  if (int rc = line->Parse(argc, argv); rc >= 0) return rc;
  if (line->daemon.chosen()) return ExecDaemon(argv, std::string(argv[1]) + " is run by gantryd");
  if (line->ClientWantsTls()) return ExecDaemon(argv, "calls to an https:// server are made by gantryd (it has TLS)");
  int rc = line->RunClientOrDocs();
  // Done: the output is flushed and nothing else is left to clean up, so skip the exit
  // handlers.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(rc >= 0 ? rc : 0);
}
