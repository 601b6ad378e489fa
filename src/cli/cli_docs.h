// The CLI describing itself, from its own definitions: examples under each command's
// --help, `gantry help CMD`, shell completion (`gantry completion bash|zsh`) and man pages
// (`gantry man [CMD]`, `gantry man --dir DIR`).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <memory>

namespace gantry {

// What `gantry --version` prints (and the man pages' footer).
inline constexpr const char* kVersionLine = "gantry 0.1.0";

// Adds examples to the commands' help and the help, completion and man commands. Call
// after every other command is defined. The returned function runs the one chosen (-1:
// none of these was).
std::function<int()> AddCliDocs(CLI::App& app, std::ostream& out, std::ostream& err);

// The bash completion script for `app` (zsh: the same through bashcompinit).
std::string CompletionScript(const CLI::App& app, bool zsh);
// A man page (roff) for `app` itself (`command` null) or one of its commands.
std::string ManPage(const CLI::App& app, const CLI::App* command);

}  // namespace gantry
