// The text checks of encoding.h (UTF-8, URL query values, CSV cells), apart from the libcrypto parts
// in encoding.cc: the lean `gantry` client uses these alone and so never loads OpenSSL.
#include <fmt/format.h>

#include <cctype>
#include <cstdint>
#include <string_view>

#include "core/encoding.h"

namespace gantry {

long InvalidUtf8At(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return static_cast<long>(i);
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return static_cast<long>(i);
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMinOf[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinOf[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return static_cast<long>(i);
    i += len;
  }
  return -1;
}

std::string UrlEncode(const std::string& value) {
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string CsvField(const std::string& text) {
  const bool formula = !text.empty() && std::string_view("=+-@\t\r").find(text[0]) != std::string_view::npos;
  const bool quoted = text.find_first_of(",\"\n\r") != std::string::npos;
  std::string out;
  out.reserve(text.size() + 4);
  if (quoted) out += '"';
  if (formula) out += '\'';
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  if (quoted) out += '"';
  return out;
}

}  // namespace gantry
