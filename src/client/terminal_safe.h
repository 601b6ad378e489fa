// Output for a terminal that no server-held text can take over: control characters in
// what the server sends (an audit entry's request path, a reason, an error message) are
// shown as ^[ or <U+009B> instead of reaching the terminal, where an escape sequence could
// retitle the window, write the clipboard or rewrite what was printed before.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

namespace gantry {

// `text` with each C0 control but tab and line feed shown as ^X (ESC as ^[, CR as ^M),
// DEL as ^?, each C1 control in UTF-8 (U+0080..U+009F) as <U+00XX>, and each byte that is
// not part of well-formed UTF-8 (a lone 0x9B, an overlong C0 9B) as <0xNN>.
std::string TerminalSafe(std::string_view text);

// A stream buffer that writes to `target` what TerminalSafe makes of it, unbuffered, so
// that it interleaves with raw writes to `target` in order.
class TerminalSafeBuffer : public std::streambuf {
 public:
  explicit TerminalSafeBuffer(std::streambuf* target) : target_(target) {}
  ~TerminalSafeBuffer() override { WriteHeld(); }
  std::streambuf* target() const { return target_; }
  // Writes the bytes held back (a UTF-8 sequence whose end has not come), each as <0xNN>.
  void WriteHeld();

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  // Writes one byte as shown (or holds it until its UTF-8 sequence is whole); false when
  // the target refuses it.
  bool Put(unsigned char c);
  bool Write(std::string_view s);
  std::streambuf* target_;
  std::string held_;  // the start of a UTF-8 sequence
};

// An answer for -o json: indented, with every character past ASCII escaped (\u009b), so
// no byte of it is a control character to a terminal and nothing is changed for a script.
std::string JsonForTerminal(const nlohmann::json& answer);

// Writes `text` to `to` as it is, past a TerminalSafeBuffer when `to` has one: a job's own
// output, which the job's team may colour or redraw with \r as on any terminal.
void WriteRaw(std::ostream& to, std::string_view text);

}  // namespace gantry
