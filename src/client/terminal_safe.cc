// Control characters from the server shown, not obeyed, by the terminal.
#include "client/terminal_safe.h"

#include <fmt/format.h>

#include <sstream>

namespace gantry {

namespace {

// How byte `c` is shown when it is a control character; "" when it goes as it is.
std::string Shown(unsigned char c) {
  if (c == '\t' || c == '\n') return "";
  if (c < 0x20) return {'^', static_cast<char>(c + 0x40)};
  if (c == 0x7f) return "^?";
  return "";
}

}  // namespace

std::string TerminalSafe(std::string_view text) {
  std::stringbuf shown;
  TerminalSafeBuffer safe(&shown);
  safe.sputn(text.data(), static_cast<std::streamsize>(text.size()));
  safe.WriteHeld();
  return shown.str();
}

void TerminalSafeBuffer::WriteHeld() {
  if (after_c2_) target_->sputc('\xc2');
  after_c2_ = false;
}

bool TerminalSafeBuffer::Put(unsigned char c) {
  auto write = [this](std::string_view s) {
    return target_->sputn(s.data(), static_cast<std::streamsize>(s.size())) == static_cast<std::streamsize>(s.size());
  };
  if (after_c2_) {
    after_c2_ = false;
    if (c >= 0x80 && c <= 0x9f) return write(fmt::format("<U+{:04X}>", c));
    if (!write("\xc2")) return false;
  }
  if (c == 0xc2) {  // held back until the next byte says whether it leads a C1 control
    after_c2_ = true;
    return true;
  }
  if (std::string s = Shown(c); !s.empty()) return write(s);
  return target_->sputc(static_cast<char>(c)) != traits_type::eof();
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
