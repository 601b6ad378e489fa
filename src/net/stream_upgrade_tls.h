// Upgraded connections over TLS (https:// servers): gantryd's and the agent's side of
// `gantry exec`/`attach` and of a session's connection back. The certificate chain and the
// host are checked as for every other call (tls_http_connection.h).
#pragma once

#include "net/stream_upgrade.h"

namespace gantry {

Expected<std::unique_ptr<ByteStream>> OpenUpgradedTlsStream(const std::string& url, const HttpRequest& request,
                                                            const HttpConnectionOptions& options,
                                                            UpgradeRefusal* refusal);

}  // namespace gantry
