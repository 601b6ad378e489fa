// The login node's service: a Unix socket anyone may connect to, answered with a session of
// the connecting process's own Unix account.
#include "cli/login_node_command.h"

#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <system_error>
#include <thread>
#include <vector>

#include "client/http_client.h"
#include "core/json_fields.h"

namespace gantry {

namespace {

constexpr int kMaxCallers = 64;  // connections served at once

// The name and Unix groups of `uid`, from the system's account database.
bool AccountOf(uid_t uid, std::string* name, std::vector<std::string>* groups) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return false;
  *name = pw.pw_name;
  int count = 64;
  std::vector<gid_t> gids(static_cast<size_t>(count));
  if (getgrouplist(pw.pw_name, pw.pw_gid, gids.data(), &count) < 0) {
    gids.resize(static_cast<size_t>(count));
    if (getgrouplist(pw.pw_name, pw.pw_gid, gids.data(), &count) < 0) return false;
  }
  gids.resize(static_cast<size_t>(count));
  for (gid_t gid : gids) {
    group gr{};
    group* g = nullptr;
    std::vector<char> gbuf(65536);
    if (getgrgid_r(gid, &gr, gbuf.data(), gbuf.size(), &g) == 0 && g) groups->push_back(g->gr_name);
  }
  return true;
}

void Answer(int fd, const nlohmann::json& answer) {
  std::string text = answer.dump() + "\n";
  size_t sent = 0;
  while (sent < text.size()) {
    ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

class LoginNodeService {
 public:
  LoginNodeService(ClientConfig config, std::ostream& err) : config_(std::move(config)), err_(err) {}

  // One connection: who is it (the kernel says), and their session.
  void Serve(int fd) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      return Answer(fd, {{"error", "the caller's credentials are unknown"}});
    }
    std::string user;
    std::vector<std::string> groups;
    if (!AccountOf(cred.uid, &user, &groups)) {
      return Answer(fd, {{"error", fmt::format("uid {} has no account on this host", cred.uid)}});
    }
    {
      // A refused account asks again no sooner than a minute later: its refusals cannot
      // flood the server (or its audit log).
      std::lock_guard<std::mutex> lock(mu_);
      auto refused = refused_.find(cred.uid);
      if (refused != refused_.end() && refused->second.second > std::chrono::steady_clock::now()) {
        return Answer(fd, {{"error", refused->second.first}});
      }
    }
    ApiClient api(config_);
    auto a = api.Post("/v1/auth/login-node",
                      nlohmann::json{{"user", user}, {"uid", cred.uid}, {"groups", groups}}.dump(), "application/json");
    if (!a) return Answer(fd, {{"error", a.status().message()}});
    if (a->status != 200) {
      err_ << fmt::format("gantry login-node: no session for {} (uid {}): {}\n", user, cred.uid, DescribeError(*a));
      if (a->status == 400 || a->status == 403) {
        std::lock_guard<std::mutex> lock(mu_);
        if (refused_.size() > 10000) refused_.clear();
        refused_[cred.uid] = {DescribeError(*a), std::chrono::steady_clock::now() + std::chrono::minutes(1)};
      }
      return Answer(fd, {{"error", DescribeError(*a)}});
    }
    // Not kept here: a session is the account's as the kernel names it now (a uid given to
    // another account, a revoked session, changed groups: each asks the server afresh).
    nlohmann::json session = a->body;
    session["server"] = config_.server;
    Answer(fd, session);
  }

 private:
  ClientConfig config_;
  std::ostream& err_;
  std::mutex mu_;
  std::map<uid_t, std::pair<std::string, std::chrono::steady_clock::time_point>> refused_;
};

int Listen(const std::string& path, std::ostream& err) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::exists(dir)) {
    fs::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0755);
  }
  // Whoever may write the socket's directory may put another socket in its place, posing as
  // this service: it must be this account's (or root's), writable by nobody else.
  struct stat d;
  if (::lstat(dir.empty() ? "." : dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode) ||
      (d.st_uid != 0 && d.st_uid != ::geteuid()) || (d.st_mode & (S_IWGRP | S_IWOTH))) {
    err << "gantry login-node: " << dir.string()
        << " must be a directory of root or of this account that nobody else may write (it holds the socket)\n";
    return -1;
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    err << "gantry login-node: --socket path too long\n";
    return -1;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const mode_t previous = ::umask(0111);  // the socket is made 0666: every user may connect
  const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::umask(previous);
  if (!bound || ::listen(fd, 64) != 0) {
    err << "gantry login-node: cannot listen on " << path << ": " << std::strerror(errno) << "\n";
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int RunLoginNode(const LoginNodeOptions& o, std::ostream& out, std::ostream& err) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  ClientConfig config;
  config.server = o.server;
  config.token_file = o.token_file;
  config.ca_cert = o.ca_cert;
  config.no_session = true;  // never this service's own socket
  if (Status s = ResolveClientConfig(config); !s.ok()) {
    err << "gantry login-node: " << s.ToString() << "\n";
    return 2;
  }
  if (config.token.empty()) {
    err << "gantry login-node: the host's token is required (--token-file; gantry token --role login-node)\n";
    return 2;
  }
  int listener = Listen(o.socket, err);
  if (listener < 0) return 2;
  auto service = std::make_shared<LoginNodeService>(config, err);
  std::atomic<bool> stopping{false};
  auto busy = std::make_shared<std::atomic<int>>(0);
  std::thread acceptor([&] {
    while (!stopping) {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 200) != 1) continue;
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      // A bounded number of callers at once: past it, a connection is closed, not served.
      if (busy->load() >= kMaxCallers) {
        ::close(fd);
        continue;
      }
      ++*busy;
      try {
        std::thread([service, fd, busy] {
          timeval tv{20, 0};
          ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
          service->Serve(fd);
          // What a client wrote is never read (nothing it says counts); drained before the
          // close, so the answer is not cut by a reset.
          ::shutdown(fd, SHUT_WR);
          char sink[4096];
          pollfd p{fd, POLLIN, 0};
          for (int i = 0; i < 16 && ::poll(&p, 1, 200) == 1 && ::read(fd, sink, sizeof sink) > 0; ++i) {
          }
          ::close(fd);
          --*busy;
        }).detach();
      } catch (const std::system_error&) {  // no thread to be had now: this caller is not served
        ::close(fd);
        --*busy;
      }
    }
  });
  out << "gantry login-node: serving " << o.socket << " for " << config.server << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  stopping = true;
  acceptor.join();
  ::close(listener);
  ::unlink(o.socket.c_str());
  return 0;
}

}  // namespace gantry
