// Control characters from the server shown, not obeyed, by the terminal.
#include "client/terminal_safe.h"

#include <fmt/format.h>

#include <sstream>

namespace gantry {

namespace {

// How ASCII byte `c` is shown: ^X for a control character but tab and line feed, ^? for
// DEL, else itself.
std::string ShownAscii(unsigned char c) {
  if (c == '\t' || c == '\n') return {static_cast<char>(c)};
  if (c < 0x20) return {'^', static_cast<char>(c + 0x40)};
  if (c == 0x7f) return "^?";
  return {static_cast<char>(c)};
}

// The length of the UTF-8 sequence lead byte `c` starts; 0 when it starts none.
size_t SequenceLength(unsigned char c) {
  if (c >= 0xc2 && c <= 0xdf) return 2;
  if (c >= 0xe0 && c <= 0xef) return 3;
  if (c >= 0xf0 && c <= 0xf4) return 4;
  return 0;
}

// Whether `c` may follow `lead` as its first continuation byte (no overlong form, no
// surrogate, nothing past U+10FFFF).
bool MayFollow(unsigned char lead, unsigned char c) {
  if (c < 0x80 || c > 0xbf) return false;
  if (lead == 0xe0) return c >= 0xa0;
  if (lead == 0xed) return c <= 0x9f;
  if (lead == 0xf0) return c >= 0x90;
  if (lead == 0xf4) return c <= 0x8f;
  return true;
}

std::string ShownInvalid(unsigned char c) { return fmt::format("<0x{:02X}>", c); }

}  // namespace

std::string TerminalSafe(std::string_view text) {
  std::stringbuf shown;
  TerminalSafeBuffer safe(&shown);
  safe.sputn(text.data(), static_cast<std::streamsize>(text.size()));
  safe.WriteHeld();
  return shown.str();
}

bool TerminalSafeBuffer::Write(std::string_view s) {
  return target_->sputn(s.data(), static_cast<std::streamsize>(s.size())) == static_cast<std::streamsize>(s.size());
}

void TerminalSafeBuffer::WriteHeld() {
  // A sequence cut short is not UTF-8: each of its bytes is shown.
  std::string held = std::move(held_);
  held_.clear();
  for (unsigned char c : held) Write(ShownInvalid(c));
}

bool TerminalSafeBuffer::Put(unsigned char c) {
  if (held_.empty()) {
    if (c < 0x80) return Write(ShownAscii(c));
    if (SequenceLength(c) == 0) return Write(ShownInvalid(c));  // a stray continuation, C0, C1, F5..FF
    held_.push_back(static_cast<char>(c));
    return true;
  }
  const auto lead = static_cast<unsigned char>(held_[0]);
  const bool fits = held_.size() == 1 ? MayFollow(lead, c) : (c >= 0x80 && c <= 0xbf);
  if (!fits) {  // the sequence ends early: its bytes are shown, and `c` starts afresh
    WriteHeld();
    return Put(c);
  }
  held_.push_back(static_cast<char>(c));
  if (held_.size() < SequenceLength(lead)) return true;
  std::string sequence = std::move(held_);
  held_.clear();
  // U+0080..U+009F, the C1 controls (0x9B is CSI to a terminal that reads them).
  if (lead == 0xc2 && c <= 0x9f) return Write(fmt::format("<U+{:04X}>", c));
  return Write(sequence);
}

TerminalSafeBuffer::int_type TerminalSafeBuffer::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  return Put(static_cast<unsigned char>(traits_type::to_char_type(c))) ? c : traits_type::eof();
}

std::streamsize TerminalSafeBuffer::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) {
    if (!Put(static_cast<unsigned char>(s[i]))) return i;
  }
  return n;
}

int TerminalSafeBuffer::sync() {
  // A lone 0xC2 at a flush is held: the byte that decides it may come in the next write.
  return target_->pubsync();
}

std::string JsonForTerminal(const nlohmann::json& answer) { return answer.dump(2, ' ', true); }

void WriteRaw(std::ostream& to, std::string_view text) {
  if (auto* safe = dynamic_cast<TerminalSafeBuffer*>(to.rdbuf())) {
    safe->WriteHeld();
    safe->target()->sputn(text.data(), static_cast<std::streamsize>(text.size()));
    return;
  }
  to << text;
}

}  // namespace gantry
