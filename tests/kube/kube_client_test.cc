// The list-and-watch loop against a scripted API server: it lists, watches from the list's
// resourceVersion with bookmarks, moves its version on with every event and bookmark,
// lists again on 410 Gone (as an ERROR event or as the watch's answer), and backs off on
// errors instead of hammering the server. And a Node object's facts.
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "kube/node_sync.h"
#include "kube/watch_loop.h"

namespace gantry::testing {
namespace {

nlohmann::json NodeObject(const std::string& name, const std::string& version) {
  return {{"metadata", {{"name", name}, {"resourceVersion", version}}}};
}

class ScriptedApi {
 public:
  ScriptedApi() {
    server_.Get("/api/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      std::string rv = req.get_param_value("resourceVersion");
      bool watch = req.has_param("watch");
      requests_.push_back(watch ? "watch " + rv : "list");
      if (watch && req.get_param_value("allowWatchBookmarks") != "true") bookmarks_asked_ = false;
      if (!watch) {
        if (++lists_ == 2) {  // the second list fails once: the loop backs off
          res.status = 500;
          res.set_content(R"({"kind": "Status", "message": "etcd is busy"})", "application/json");
          return;
        }
        std::string version = lists_ == 1 ? "10" : "20";
        res.set_content(
            nlohmann::json{{"metadata", {{"resourceVersion", version}}}, {"items", {NodeObject("node-a", version)}}}
                .dump(),
            "application/json");
        return;
      }
      std::string body;
      if (rv == "10") {  // too old: the server says so in the stream
        body = nlohmann::json{{"type", "ERROR"}, {"object", {{"kind", "Status"}, {"code", 410}}}}.dump() + "\n";
      } else if (rv == "20") {
        body = nlohmann::json{{"type", "BOOKMARK"}, {"object", NodeObject("", "25")}}.dump() + "\n" +
               nlohmann::json{{"type", "ADDED"}, {"object", NodeObject("node-b", "26")}}.dump() + "\n" +
               nlohmann::json{{"type", "DELETED"}, {"object", NodeObject("node-a", "27")}}.dump() + "\n";
      } else if (rv == "27") {
        res.status = 410;  // gone as the watch's own answer
        res.set_content(R"({"kind": "Status", "code": 410, "message": "too old resource version"})",
                        "application/json");
        return;
      }
      res.set_content(body, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ScriptedApi() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  bool bookmarks_asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return bookmarks_asked_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
  int lists_ = 0;
  bool bookmarks_asked_ = true;
};

TEST(WatchLoop, ListsWatchesFollowsBookmarksAndListsAgainWhenTheVersionIsGone) {
  ScriptedApi api;
  KubeConfig config;
  config.url = api.url();
  std::mutex mu;
  std::vector<std::string> seen;
  WatchLoop loop(config, "/api/v1/nodes", "",
                 {[&](const std::vector<nlohmann::json>& items) {
                    std::lock_guard<std::mutex> lock(mu);
                    seen.push_back("listed " + std::to_string(items.size()));
                  },
                  [&](const std::string& type, const nlohmann::json& node) {
                    std::lock_guard<std::mutex> lock(mu);
                    seen.push_back(type + " " + node["metadata"].value("name", ""));
                  }});
  auto t0 = std::chrono::steady_clock::now();
  loop.Start();
  for (int i = 0; i < 300 && loop.gone() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  loop.Stop();
  auto took = std::chrono::steady_clock::now() - t0;
  std::vector<std::string> requests = api.requests();
  ASSERT_GE(requests.size(), 6u);
  // list (rv 10) -> watch 10 gets 410 -> list fails (500), a second's backoff -> list (rv 20)
  // -> watch 20: a bookmark (25), node-b added (26), node-a deleted (27) -> watch 27: 410.
  EXPECT_EQ(std::vector<std::string>(requests.begin(), requests.begin() + 6),
            (std::vector<std::string>{"list", "watch 10", "list", "list", "watch 20", "watch 27"}));
  EXPECT_TRUE(api.bookmarks_asked());
  EXPECT_GE(took, std::chrono::milliseconds(900));  // the backoff after the failed list
  EXPECT_EQ(loop.gone(), 2);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(seen.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(seen.begin(), seen.begin() + 4),
            (std::vector<std::string>{"listed 1", "listed 1", "ADDED node-b", "DELETED node-a"}));
}

TEST(NodeFacts, LabelsHardTaintsAndCordonOfANodeObject) {
  nlohmann::json node = nlohmann::json::parse(R"({
    "metadata": {"name": "gpu-7", "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                             "nvidia.com/mig.strategy": "mixed"}},
    "spec": {"unschedulable": true, "taints": [
      {"key": "dedicated", "value": "inference", "effect": "NoSchedule"},
      {"key": "maintenance", "effect": "NoExecute"},
      {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"},
      {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
      {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
      {"key": "gantry.io/dedicated", "value": "true", "effect": "NoSchedule"}]}})");
  KubeNodeFacts facts = NodeFacts(node);
  EXPECT_EQ(facts.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(facts.labels.at("nvidia.com/mig.strategy"), "mixed");
  EXPECT_TRUE(facts.cordoned);
  EXPECT_FALSE(facts.deleted);
  EXPECT_EQ(facts.taints, (std::vector<Taint>{{"dedicated", "inference"}, {"maintenance", ""}}));
  // Whatever the object holds, bad types are skipped, not trusted.
  KubeNodeFacts odd = NodeFacts(nlohmann::json::parse(
      R"({"metadata": {"labels": {"a": 1}}, "spec": {"unschedulable": "yes", "taints": [7, {"key": 3}]}})"));
  EXPECT_TRUE(odd.labels.empty());
  EXPECT_TRUE(odd.taints.empty());
}

}  // namespace
}  // namespace gantry::testing
