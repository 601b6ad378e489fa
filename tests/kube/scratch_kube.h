// A throw-away Kubernetes API server for the tests of one suite (scripts/kube-scratch.sh):
// kube-apiserver on etcd, on free loopback ports in a temp directory, with an admin token;
// stopped and deleted when the object goes. `Kubectl` runs kubectl against it, and
// `Api` calls it directly as the admin.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "command_util.h"
#include "core/read_file.h"

namespace gantry::testing {

class ScratchKube {
 public:
  ScratchKube() {
    char tmpl[] = "/tmp/gantry-kube-XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir_ = tmpl;
    std::string out;
    int rc = RunCommand(Script() + " start " + dir_ + " 2>&1", &out);
    if (rc == 0)
      url_ = out.substr(out.rfind("https://"), out.find('\n', out.rfind("https://")) - out.rfind("https://"));
    EXPECT_EQ(rc, 0) << "kube-scratch.sh start failed: " << out;
    admin_token_ = ReadFileNoThrow(dir_ + "/admin-token").value_or("");
  }
  ~ScratchKube() {
    if (dir_.empty()) return;
    std::string out;
    RunCommand(Script() + " stop " + dir_ + " 2>&1", &out);
  }
  ScratchKube(const ScratchKube&) = delete;
  ScratchKube& operator=(const ScratchKube&) = delete;

  const std::string& url() const { return url_; }  // https://127.0.0.1:PORT; empty: not started
  const std::string& dir() const { return dir_; }
  std::string ca() const { return dir_ + "/ca.crt"; }

  // `kubectl ARGS` as the admin; its exit code, with stdout and stderr in `out`.
  int Kubectl(const std::string& args, std::string* out) const {
    out->clear();
    return RunCommand("kubectl --kubeconfig " + dir_ + "/kubeconfig " + args + " 2>&1", out);
  }
  // A call as the admin: the status and the JSON body (null on no answer).
  std::pair<int, nlohmann::json> Api(const std::string& method, const std::string& path,
                                     const nlohmann::json& body = nullptr) const {
    httplib::Client c(url_);
    c.set_ca_cert_path(ca().c_str());
    c.enable_server_certificate_verification(true);
    c.set_bearer_token_auth(admin_token_);
    httplib::Result r = method == "GET"      ? c.Get(path)
                        : method == "DELETE" ? c.Delete(path)
                        : method == "PATCH"  ? c.Patch(path, body.dump(), "application/merge-patch+json")
                                             : c.Post(path, body.dump(), "application/json");
    if (!r) return {0, nullptr};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  // A token of `ns`/`account` for `audience`, bound to pod `pod` (its uid) when given: what
  // the kubelet writes into a pod's projected service-account volume.
  std::string TokenFor(const std::string& ns, const std::string& account, const std::string& audience,
                       const nlohmann::json& pod = nullptr) const {
    nlohmann::json spec = {{"audiences", {audience}}, {"expirationSeconds", 3600}};
    if (!pod.is_null()) {
      spec["boundObjectRef"] = {
          {"kind", "Pod"}, {"apiVersion", "v1"}, {"name", pod["metadata"]["name"]}, {"uid", pod["metadata"]["uid"]}};
    }
    auto [status, body] = Api("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts/" + account + "/token",
                              {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"}, {"spec", spec}});
    EXPECT_EQ(status, 201) << body.dump();
    return body.is_object() ? body["status"].value("token", "") : "";
  }

 private:
  static std::string Script() { return std::string("bash " GANTRY_SOURCE_DIR "/scripts/kube-scratch.sh"); }
  std::string dir_, url_, admin_token_;
};

}  // namespace gantry::testing
