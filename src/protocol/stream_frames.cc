// Session frames: encoding, the incremental reader, and the resize payload.
#include "protocol/stream_frames.h"

#include <charconv>

namespace gantry {

namespace {

bool KnownType(char c) {
  switch (static_cast<FrameType>(c)) {
    case FrameType::kStdin:
    case FrameType::kStdinEnd:
    case FrameType::kResize:
    case FrameType::kSignal:
    case FrameType::kStdout:
    case FrameType::kStderr:
    case FrameType::kExit:
    case FrameType::kError: return true;
  }
  return false;
}

}  // namespace

std::string EncodeFrame(FrameType type, std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  out += static_cast<char>(type);
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  out.append(payload);
  return out;
}

bool ParseResize(std::string_view payload, int* cols, int* rows) {
  size_t space = payload.find(' ');
  if (space == std::string_view::npos) return false;
  auto number = [](std::string_view s, int* out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && end == s.data() + s.size() && *out >= 1 && *out <= 10000;
  };
  return number(payload.substr(0, space), cols) && number(payload.substr(space + 1), rows);
}

FrameReader::Result FrameReader::Next(Frame* frame) {
  if (!error_.empty()) return Result::kBad;
  if (buffer_.size() - pos_ < 5) return Result::kNeedMore;
  const char type = buffer_[pos_];
  if (!KnownType(type)) {
    error_ = "a frame of unknown type";
    return Result::kBad;
  }
  uint32_t n = 0;
  for (size_t i = 1; i <= 4; ++i) n = (n << 8) | static_cast<unsigned char>(buffer_[pos_ + i]);
  if (n > kMaxFramePayload) {
    error_ = "a frame over 64 KiB";
    return Result::kBad;
  }
  if (buffer_.size() - pos_ - 5 < n) return Result::kNeedMore;
  frame->type = static_cast<FrameType>(type);
  frame->payload.assign(buffer_, pos_ + 5, n);
  pos_ += 5 + n;
  if (pos_ > 65536 && pos_ * 2 > buffer_.size()) {  // drop what was read
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  return Result::kFrame;
}

}  // namespace gantry
