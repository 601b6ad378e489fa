// One word for /bin/sh, whatever it holds: single-quoted, with each ' written as '\''.
#pragma once

#include <string>

namespace gantry {

std::string ShellQuote(const std::string& word);

}  // namespace gantry
