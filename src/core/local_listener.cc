// Reads /proc/net/tcp{,6} for the owner of a listening socket.
#include "core/local_listener.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace gantry {

namespace {

constexpr const char* kListen = "0A";  // TCP_LISTEN in /proc/net/tcp's st column

bool IsLoopbackHost(const std::string& host) {
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return host == "localhost" || host == "::1";
}

// Whether a local address as /proc/net/tcp{,6} writes it ("0100007F" for 127.0.0.1, 32 hex
// digits for IPv6) is loopback or "every address".
bool LoopbackOrAny(const std::string& hex) {
  if (hex.size() == 8) {  // IPv4, the bytes in host (little-endian) order
    return hex == "00000000" || hex.substr(6, 2) == "7F";
  }
  return hex == std::string(32, '0') || hex == "00000000000000000000000001000000" ||      // :: and ::1
         (hex.substr(0, 24) == "0000000000000000FFFF0000" && hex.substr(30, 2) == "7F");  // ::ffff:127.x
}

}  // namespace

std::vector<uid_t> LoopbackListenerUids(int port, const std::string& proc_net) {
  const std::string want_port = fmt::format("{:04X}", port);
  std::vector<uid_t> owners;
  for (const char* table : {"tcp", "tcp6"}) {
    std::ifstream in(proc_net + "/" + table);
    std::string line;
    std::getline(in, line);  // the column names
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits;
      long owner = -1;
      if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> owner)) continue;
      auto colon = local.find(':');
      if (state != kListen || colon == std::string::npos || local.substr(colon + 1) != want_port) continue;
      if (LoopbackOrAny(local.substr(0, colon))) owners.push_back(static_cast<uid_t>(owner));
    }
  }
  return owners;
}

bool LoopbackListenerOwnedBy(const std::string& host, int port, uid_t uid, const std::string& proc_net) {
  if (!IsLoopbackHost(host)) return false;
  // Two listeners on one port (SO_REUSEPORT, or v4 and v6 by different accounts): the
  // connection could reach either, so both must be the owner's.
  std::vector<uid_t> owners = LoopbackListenerUids(port, proc_net);
  return !owners.empty() && std::all_of(owners.begin(), owners.end(), [uid](uid_t o) { return o == uid; });
}

}  // namespace gantry
