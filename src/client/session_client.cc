// The client's session loop: poll stdin and the stream, frames both ways, raw mode and
// window changes, Ctrl-C as a signal for the command (or a detach for attach).
#include "client/session_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstring>
#include <ostream>

#include "client/terminal_safe.h"
#include "protocol/stream_frames.h"

namespace gantry {

namespace {

std::atomic<int> g_winch{0};
std::atomic<int> g_interrupts{0};
void OnWinch(int) { g_winch.fetch_add(1); }
void OnInterrupt(int) { g_interrupts.fetch_add(1); }

constexpr int kWriteTimeoutMs = 30000;

// Raw mode on the terminal while it lives: keys (Ctrl-C included) go to the remote
// terminal as bytes, which decides what they mean.
class RawTerminal {
 public:
  explicit RawTerminal(bool on) {
    if (!on || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);  // output too: the remote terminal already turned \n into \r\n
    active_ = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

// Installs a handler for a signal while it lives.
class SignalHandler {
 public:
  SignalHandler(int sig, void (*handler)(int)) : sig_(sig) {
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, &old_);
  }
  ~SignalHandler() { sigaction(sig_, &old_, nullptr); }

 private:
  int sig_;
  struct sigaction old_ {};
};

bool WriteFd(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A line of our own among the command's output: on a raw terminal it needs its own
// carriage return, which the (terminal-safe) error stream would show as ^M.
void Note(const SessionIo& io, std::ostream& err, const std::string& line) {
  if (io.tty) {
    err << std::flush;
    WriteFd(STDERR_FILENO, "\r\n" + TerminalSafe(line) + "\r\n");
  } else {
    err << line << std::endl;
  }
}

}  // namespace

void TerminalSize(int* cols, int* rows) {
  winsize ws{};
  *cols = 80;
  *rows = 24;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    *cols = ws.ws_col;
    *rows = ws.ws_row;
  }
}

int RunClientSession(ByteStream& stream, const SessionIo& io, std::ostream& err) {
  g_winch = 0;
  g_interrupts = 0;
  SignalHandler winch(SIGWINCH, OnWinch);
  SignalHandler interrupt(SIGINT, OnInterrupt);
  RawTerminal raw(io.tty);
  bool stdin_open = io.forward_stdin;
  // No input: the command reads its end at once (not a pipe that never ends).
  if (!io.forward_stdin && !io.attach && !stream.WriteAll(EncodeFrame(FrameType::kStdinEnd, ""), kWriteTimeoutMs)) {
    err << "gantry: the session's connection was lost\n";
    return 255;
  }
  int winch_seen = 0, interrupts_seen = 0;
  FrameReader frames;
  char buf[65536];
  for (;;) {
    if (int w = g_winch.load(); w != winch_seen) {
      winch_seen = w;
      int cols = 0, rows = 0;
      TerminalSize(&cols, &rows);
      if (!stream.WriteAll(EncodeFrame(FrameType::kResize, std::to_string(cols) + " " + std::to_string(rows)),
                           kWriteTimeoutMs)) {
        break;
      }
    }
    if (int i = g_interrupts.load(); i != interrupts_seen) {
      interrupts_seen = i;
      if (io.attach) {
        if (!io.detach_note.empty()) err << io.detach_note << std::endl;
        return 130;
      }
      // No terminal (a terminal's Ctrl-C is a byte the remote side reads): the signal goes
      // to the command; a second Ctrl-C leaves it running and exits.
      if (i > 1) {
        err << "gantry: left the session; its command was sent SIGINT\n";
        return 130;
      }
      stream.WriteAll(EncodeFrame(FrameType::kSignal, "INT"), kWriteTimeoutMs);
    }
    pollfd p[2] = {{stream.fd(), POLLIN, 0}, {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
    if (!stream.Pending()) {
      int n = ::poll(p, 2, 500);
      if (n < 0 && errno != EINTR) break;
      if (n <= 0) continue;
    }
    if (stdin_open && p[1].revents) {
      ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf) > kMaxFramePayload ? kMaxFramePayload : sizeof(buf));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        stdin_open = false;
        stream.WriteAll(EncodeFrame(FrameType::kStdinEnd, ""), kWriteTimeoutMs);
      } else if (!stream.WriteAll(EncodeFrame(FrameType::kStdin, std::string_view(buf, static_cast<size_t>(n))),
                                  kWriteTimeoutMs)) {
        break;
      }
    }
    if (!(p[0].revents || stream.Pending())) continue;
    ssize_t n = stream.ReadSome(buf, sizeof(buf));
    if (n == ByteStream::kWouldBlock) continue;
    if (n <= 0) break;
    frames.Feed(std::string_view(buf, static_cast<size_t>(n)));
    Frame f;
    FrameReader::Result r;
    while ((r = frames.Next(&f)) == FrameReader::Result::kFrame) {
      switch (f.type) {
        case FrameType::kStdout: WriteFd(STDOUT_FILENO, f.payload); break;
        case FrameType::kStderr: WriteFd(STDERR_FILENO, f.payload); break;
        case FrameType::kError: Note(io, err, "gantry: " + f.payload); break;
        case FrameType::kExit: {
          int code = 255;
          std::from_chars(f.payload.data(), f.payload.data() + f.payload.size(), code);
          return code < 0 ? 1 : code;
        }
        default: break;
      }
    }
    if (r == FrameReader::Result::kBad) {
      err << "gantry: the session's answer cannot be read: " << frames.error() << "\n";
      return 255;
    }
  }
  Note(io, err, "gantry: the session's connection was lost before its command ended");
  return 255;
}

}  // namespace gantry
