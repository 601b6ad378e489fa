// The leader's address in its Service's Endpoints object. The controller's Service has no
// selector: the leading replica writes its own pod IP and port there when it takes over,
// and again whenever the object says otherwise (checked every few seconds), so traffic
// goes to the leader while every replica, the standby included, is Ready. The permission
// this needs is update on that one object (resourceNames in the Role), not on pods.
#pragma once

#include <condition_variable>
#include <iosfwd>
#include <mutex>
#include <string>
#include <thread>

#include "kube/kube_client.h"

namespace gantry {

struct LeaderAddress {
  std::string ns;                  // the Service's namespace
  std::string service;             // the Service's (and its Endpoints object's) name
  std::string ip;                  // this pod's IP
  std::string pod;                 // and its name, for the address's targetRef ("": none)
  int port = 0;                    // where this server listens
  std::string port_name = "http";  // the Service port's name, which the endpoint port must carry
};

// The Endpoints object's `subsets` that send the Service's traffic to `a`.
nlohmann::json LeaderSubsets(const LeaderAddress& a);

class LeaderEndpoints {
 public:
  // Problems (a refusal, an API server out of reach) are written to `err`, once each.
  LeaderEndpoints(KubeConfig config, LeaderAddress address, std::ostream& err);
  ~LeaderEndpoints();
  // Writes the address now, then keeps it there every `every` until destroyed.
  void Start(std::chrono::milliseconds every = std::chrono::seconds(5));
  // One look: writes the address when the object holds another. OK when it is there.
  Status EnsureOnce();

 private:
  KubeClient client_;
  LeaderAddress address_;
  std::ostream& err_;
  std::string last_error_ = "(not yet tried)";
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gantry
