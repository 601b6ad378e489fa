// The agent's side of a connection to a job's named port (the server's port proxy): the
// port must be one the run was lent and listened on by the job's own account (not by a
// neighbour that bound it first); then the bytes go both ways between the server's
// stream and 127.0.0.1:PORT. What the server sends is a whole HTTP request it checked and
// rewrote; the agent reads none of it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/byte_stream.h"
#include "core/status.h"

namespace gantry {

// Whether `port` is listened on by `uid` alone where loopback reaches it
// (core/local_listener.h): Ok, or why not (no listener: kUnavailable; another account's:
// kPermissionDenied).
Status CheckPortListener(const std::string& proc_net, int port, uid_t uid);

// The secret a run's apps know its proxied requests by (GANTRY_PORT_TOKEN): an HMAC of the
// job and run under this node's key (`state_dir`/port-token.key, made on first use, 0600),
// so it is the same after an agent restart and no process of another account learns it.
std::string PortToken(const std::string& state_dir, const std::string& job_id, int run);

// Relays `stream` and 127.0.0.1:`port` (else [::1]:`port`) until either ends or `stop`.
// The request's head gets `Authorization: token TOKEN` and `X-Gantry-Port-Token: TOKEN`
// (Jupyter takes the first as its login): an app that checks it answers only requests
// that came through the proxy, not other processes on the node. When neither address
// answers, the client gets a 502 naming the job's port.
void RunPortSession(int port, const std::string& port_name, const std::string& token, ByteStream& stream,
                    const std::atomic<bool>& stop);

// Answers a port connection that will not be relayed: an HTTP answer with `status` and
// `why` as plain text (the browser shows it as the page).
void RefusePortSession(ByteStream& stream, int status, const std::string& why);

}  // namespace gantry
