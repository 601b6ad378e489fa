// The standalone server's admin token (DATA_DIR/admin.token) is what a bare `gantry` call
// sends when no token is given. Another local user who binds 127.0.0.1:PORT while the
// server is down, or a --server pointing at another host, must not receive it: it goes only
// to a loopback listener owned by the token file's owner.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "command_util.h"
#include "core/local_listener.h"
#include "loopback.h"

namespace gantry::testing {
namespace {

// A fake /proc/net with these tcp and tcp6 tables (after their header line).
std::string FakeProcNet(const std::string& tcp, const std::string& tcp6) {
  std::string dir = ::testing::TempDir() + "gantry-proc-net-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const char* header =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
  std::ofstream(dir + "/tcp") << header << tcp;
  std::ofstream(dir + "/tcp6") << header << tcp6;
  return dir;
}

TEST(LocalListener, ReadsTheListenersOwnerAndRefusesWhatIsNotLoopback) {
  // 127.0.0.1:8080 (1F90) listening, owned by uid 1000; a connection (01) owned by 0.
  std::string dir = FakeProcNet(
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0\n"
      "   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0\n",
      "");
  EXPECT_TRUE(LoopbackListenerOwnedBy("127.0.0.1", 8080, 1000, dir));
  EXPECT_TRUE(LoopbackListenerOwnedBy("localhost", 8080, 1000, dir));
  EXPECT_FALSE(LoopbackListenerOwnedBy("127.0.0.1", 8080, 0, dir)) << "another account's listener";
  EXPECT_FALSE(LoopbackListenerOwnedBy("127.0.0.1", 8081, 1000, dir)) << "nothing listens there";
  EXPECT_FALSE(LoopbackListenerOwnedBy("10.0.0.5", 8080, 1000, dir)) << "not a loopback address";
  EXPECT_FALSE(LoopbackListenerOwnedBy("127.0.0.1.evil.example", 8080, 1000, dir));
  // The owner's v4 listener and another account's on [::]:8080: either could answer.
  dir =
      FakeProcNet("   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0\n",
                  "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A "
                  "00000000:00000000 00:00000000 00000000  1001        0 3 1 0\n");
  EXPECT_FALSE(LoopbackListenerOwnedBy("127.0.0.1", 8080, 1000, dir));
  EXPECT_FALSE(LoopbackListenerOwnedBy("::1", 8080, 1000, dir));
  // A real socket of this process.
  int port = 0;
  int fd = ListenOnLoopback(&port);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(LoopbackListenerOwnedBy("127.0.0.1", port, geteuid()));
  EXPECT_FALSE(LoopbackListenerOwnedBy("127.0.0.1", port, geteuid() + 1));
  close(fd);
}

// Runs a bare `gantry queue` (HOME holding an admin token of this account) against a
// listener of `listener_uid`; returns the request it received.
std::string RequestReceivedBy(uid_t listener_uid) {
  std::string home = ::testing::TempDir() + "gantry-admin-token-" + std::to_string(::getpid());
  std::filesystem::create_directories(home + "/.local/share/gantry");
  std::ofstream(home + "/.local/share/gantry/admin.token") << "gtk_the_admin_token\n";
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "pipe failed";
  int port = FreeLoopbackPort();
  pid_t child = fork();
  if (child == 0) {  // the listener, as `listener_uid`
    close(pipe_fds[0]);
    if (listener_uid != geteuid() && (setgid(listener_uid) != 0 || setuid(listener_uid) != 0)) _exit(2);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4) != 0) _exit(3);
    (void)!write(pipe_fds[1], "L", 1);
    int c = accept(fd, nullptr, nullptr);
    char buf[8192];
    ssize_t n = read(c, buf, sizeof(buf));
    if (n > 0) (void)!write(pipe_fds[1], buf, static_cast<size_t>(n));
    const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    (void)!write(c, answer, sizeof(answer) - 1);
    _exit(0);
  }
  close(pipe_fds[1]);
  char ready;
  if (read(pipe_fds[0], &ready, 1) != 1) return "the listener did not start";
  std::string out;
  RunCommand(fmt::format("env -i PATH=/usr/bin:/bin HOME={} {} queue --server http://127.0.0.1:{} 2>&1", home,
                         GANTRY_BINARY, port),
             &out);
  std::string request;
  char buf[8192];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof(buf))) > 0;) request.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  waitpid(child, nullptr, 0);
  std::filesystem::remove_all(home);
  return request;
}

TEST(LocalAdminToken, GoesOnlyToAListenerOfTheTokensOwner) {
  std::string own = RequestReceivedBy(geteuid());
  EXPECT_NE(own.find("Bearer gtk_the_admin_token"), std::string::npos) << own;
  if (geteuid() != 0) GTEST_SKIP() << "a listener of another account needs root to start";
  std::string rogue = RequestReceivedBy(65534);  // nobody, who bound the port first
  EXPECT_NE(rogue.find("GET /v1/"), std::string::npos) << rogue;
  EXPECT_EQ(rogue.find("gtk_the_admin_token"), std::string::npos) << rogue;
}

}  // namespace
}  // namespace gantry::testing
