// Sealing what a sign-in under way must remember into the browser's own cookie: AES-256-GCM
// under a key this server process draws at start, so the server keeps no table that callers
// could fill, and a cookie that was forged, altered or sealed by another process opens to
// nothing.
#pragma once

#include <optional>
#include <string>

namespace gantry {

class SealedBox {
 public:
  SealedBox();  // a fresh random key
  // Encrypted and authenticated; URL- and cookie-safe text. `purpose` is bound in: what is
  // sealed for one purpose does not open for another.
  std::string Seal(const std::string& plain, const std::string& purpose) const;
  // The plain text, or nothing when `sealed` is not what Seal made with this key and purpose.
  std::optional<std::string> Open(const std::string& sealed, const std::string& purpose) const;

 private:
  unsigned char key_[32];
};

}  // namespace gantry
