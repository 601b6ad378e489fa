// Quoting a word for /bin/sh.
#include "core/shell_quote.h"

namespace gantry {

std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace gantry
