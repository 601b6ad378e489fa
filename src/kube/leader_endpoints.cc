// LeaderEndpoints: compare the Endpoints object's subsets with this leader's, and merge-patch
// them when they differ (a patch replaces the whole `subsets` list).
#include "kube/leader_endpoints.h"

#include <fmt/format.h>

#include <ostream>

namespace gantry {

nlohmann::json LeaderSubsets(const LeaderAddress& a) {
  nlohmann::json address = {{"ip", a.ip}};
  // The pod behind the address: `kubectl port-forward pod/NAME` reaches the leader by it.
  if (!a.pod.empty()) address["targetRef"] = {{"kind", "Pod"}, {"namespace", a.ns}, {"name", a.pod}};
  return nlohmann::json::array(
      {{{"addresses", {address}}, {"ports", {{{"name", a.port_name}, {"port", a.port}, {"protocol", "TCP"}}}}}});
}

LeaderEndpoints::LeaderEndpoints(KubeConfig config, LeaderAddress address, std::ostream& err)
    : client_(std::move(config)), address_(std::move(address)), err_(err) {}

LeaderEndpoints::~LeaderEndpoints() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  client_.Stop();
  if (thread_.joinable()) thread_.join();
}

Status LeaderEndpoints::EnsureOnce() {
  const std::string path = fmt::format("/api/v1/namespaces/{}/endpoints/{}", address_.ns, address_.service);
  const nlohmann::json wanted = LeaderSubsets(address_);
  auto now = client_.Get(path);
  if (!now) return now.status();
  if (now->status == 404) {
    // The manifests make it (the Role grants update on it by name, not create): say so.
    return Status::NotFound(fmt::format("endpoints {}/{}: no such object (the manifests' service.yaml makes it)",
                                        address_.ns, address_.service));
  }
  if (!now->ok())
    return Status::Internal(fmt::format("endpoints {}/{}: {}", address_.ns, address_.service, now->Error()));
  if (now->body.is_object() && now->body.contains("subsets") && now->body["subsets"] == wanted) return Status::Ok();
  auto patched = client_.Patch(path, {{"subsets", wanted}});
  if (!patched) return patched.status();
  if (!patched->ok())
    return Status::Internal(fmt::format("endpoints {}/{}: {}", address_.ns, address_.service, patched->Error()));
  return Status::Ok();
}

void LeaderEndpoints::Start(std::chrono::milliseconds every) {
  thread_ = std::thread([this, every] {
    for (;;) {
      Status s = EnsureOnce();
      std::string error = s.ok() ? "" : s.ToString();
      if (error != last_error_) {
        err_ << (error.empty() ? fmt::format("kubernetes: the Service {}/{} sends to this leader ({}:{})\n",
                                             address_.ns, address_.service, address_.ip, address_.port)
                               : "kubernetes: cannot point the Service at this leader: " + error + "\n")
             << std::flush;
        last_error_ = error;
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, every, [this] { return stop_; })) return;
    }
  });
}

}  // namespace gantry
