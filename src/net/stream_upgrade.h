// The client's side of an upgraded connection (Upgrade: gantry-stream): `gantry exec`,
// `shell` and `attach`, and the agent connecting back for a session. Connects, sends the
// request, reads the answer's head; a 101 gives the connection as a byte stream, anything
// else the server's words as an error. The plain transport is here; https:// is
// stream_upgrade_tls.h's (gantryd's and the agent's), set with SetTlsStreamOpener.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/byte_stream.h"
#include "core/status.h"
#include "net/http_exchange.h"

namespace gantry {

// Why an upgrade was refused: the server's HTTP status (0: no answer) and its words.
struct UpgradeRefusal {
  int status = 0;
  std::string message;
};

using StreamOpener = std::function<Expected<std::unique_ptr<ByteStream>>(
    const std::string& url, const HttpRequest& request, const HttpConnectionOptions& options, UpgradeRefusal* refusal)>;

// Opens `request` (a GET; its path under the URL's prefix) to `url` and upgrades it.
// http:// only; https:// goes to the opener set with SetTlsStreamOpener (else it fails
// saying so). On a refusal, `refusal` (when given) gets the status and message.
Expected<std::unique_ptr<ByteStream>> OpenUpgradedStream(const std::string& url, const HttpRequest& request,
                                                         const HttpConnectionOptions& options,
                                                         UpgradeRefusal* refusal = nullptr);
void SetTlsStreamOpener(StreamOpener opener);

// The part both transports share once connected: sends the request on `stream`, reads the
// answer's head (and a refusal's body), and returns the stream on a 101.
Expected<std::unique_ptr<ByteStream>> FinishUpgrade(std::unique_ptr<ByteStream> stream, const ServerAddress& address,
                                                    const HttpRequest& request, const HttpConnectionOptions& options,
                                                    UpgradeRefusal* refusal);
// A TCP connection to the address within the connect timeout (a blocking socket), or why not.
Expected<int> ConnectTcp(const ServerAddress& address, const HttpConnectionOptions& options);

}  // namespace gantry
