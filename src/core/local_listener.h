// Who listens at a loopback address: the standalone server's admin token is sent only to a
// server run by the account that owns the token, not to whatever another local user bound
// to 127.0.0.1:8080 while the server was down; a job's port is proxied only to the job's own
// account, not to a neighbour that bound it first.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gantry {

// Whether `host`:`port` is a loopback address (127.0.0.0/8, localhost, ::1) where a TCP
// socket owned by `uid` listens (bound to it or to every address), per /proc/net/tcp and
// /proc/net/tcp6. `proc_net` is the directory to read (tests give their own).
bool LoopbackListenerOwnedBy(const std::string& host, int port, uid_t uid, const std::string& proc_net = "/proc/net");

// The owners (uids) of the TCP sockets listening on `port` that a connection to loopback
// reaches (bound to loopback or to every address), per `proc_net`/tcp and tcp6; empty when
// none listens.
std::vector<uid_t> LoopbackListenerUids(int port, const std::string& proc_net = "/proc/net");

}  // namespace gantry
