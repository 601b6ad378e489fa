// Interactive work across a container job (podman, the busybox test image): gantry exec
// runs inside the job's container as its account, with a terminal when asked and the
// command's exit status; a web server in the container answers through the port proxy at
// its prefix.
#include <gtest/gtest.h>
#include <pwd.h>

#include "container_fixture.h"
#include "port_util.h"
#include "session_util.h"

namespace gantry::testing {
namespace {

class ContainerSessions : public Containers {
 protected:
  // Containers outlive their server: each test's job is cancelled (its container removed).
  void TearDown() override {
    for (const std::string& id : started_) {
      server_->Client(kAliceToken).Delete("/v1/jobs/" + id);
      WaitFor(id, "cancelled");
    }
  }
  std::vector<std::string> started_;
  // A container job that serves /index.html at its port's prefix with busybox's httpd.
  std::string Serving() {
    std::string id =
        Submit({{"gpus", 1},
                {"container_image", kTestImage},
                {"ports", {"web"}},
                {"command",
                 "busybox mkdir -p /tmp/www$GANTRY_PORT_WEB_PREFIX && echo inside-the-image > "
                 "/tmp/www$GANTRY_PORT_WEB_PREFIX/index.html && exec busybox httpd -f -p 127.0.0.1:$GANTRY_PORT_WEB "
                 "-h /tmp/www"}})
            .value("id", "");
    started_.push_back(id);
    EXPECT_EQ(WaitFor(id, "running"), "running") << Job(id).dump();
    return id;
  }
};

TEST_F(ContainerSessions, ExecRunsInsideTheJobsContainerAsItsAccount) {
  std::string id = Serving();
  int rc = 0;
  std::string out =
      Cli("exec " + id + " -- sh -c 'cat /etc/gantry-image; id -u; echo gpu=$CUDA_VISIBLE_DEVICES; exit 4'",
          kAliceToken, &rc);
  EXPECT_EQ(rc, 4) << out;
  EXPECT_NE(out.find("gantry test image\n"), std::string::npos) << "the image's own file: " << out;
  EXPECT_NE(out.find(std::to_string(getpwnam("nobody")->pw_uid) + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("gpu=GPU-fake-a100-80gb-0-0"), std::string::npos) << out;
  // On a terminal.
  auto s = OpenSession(server_->address(), kAliceToken,
                       ExecPath(id, {"sh", "-c", "test -t 0 && echo on-a-tty; cat /etc/gantry-image"}, true));
  ASSERT_TRUE(s) << s.status().ToString();
  SessionSeen seen;
  ASSERT_TRUE(ReadFrames(**s, seen, 20000)) << seen.out << seen.error;
  EXPECT_NE(seen.out.find("on-a-tty"), std::string::npos) << seen.out;
  EXPECT_NE(seen.out.find("gantry test image"), std::string::npos) << seen.out;
  EXPECT_EQ(seen.exit, 0);
  EXPECT_EQ(WaitFor(id, "running"), "running") << "the job goes on";
}

TEST_F(ContainerSessions, AWebServerInTheContainerAnswersThroughThePortProxy) {
  std::string id = Serving();
  nlohmann::json job = Job(id);
  std::string proxy_url;
  for (const auto& p : job.value("ports", nlohmann::json::array())) {
    if (p.value("name", "") == "web") proxy_url = p.value("proxy_url", "");
  }
  ASSERT_FALSE(proxy_url.empty()) << job.dump();
  std::string path = "/jobs/" + id + "/ports/web/";
  std::string ports_url = proxy_url.substr(0, proxy_url.size() - path.size());
  RawAnswer a;
  for (int i = 0; i < 100 && a.status != 200; ++i) {
    a = ProxyGet(ports_url, path, std::string("Authorization: Bearer ") + kAliceToken + "\r\n");
    if (a.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(a.status, 200) << a.head << a.body;
  EXPECT_EQ(a.body, "inside-the-image\n");
}

}  // namespace
}  // namespace gantry::testing
