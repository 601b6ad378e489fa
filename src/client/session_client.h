// The client's end of an interactive session: the user's terminal in raw mode (restored
// however the session ends), typed input and window sizes to the agent, the command's
// output to this process's stdout and stderr, and the exit status it ends with.
#pragma once

#include <iosfwd>
#include <string>

#include "core/byte_stream.h"

namespace gantry {

struct SessionIo {
  bool tty = false;           // the user's terminal goes raw; its size follows SIGWINCH
  bool forward_stdin = true;  // what this process reads goes to the command (EOF included)
  bool attach = false;        // Ctrl-C detaches (the job goes on) instead of reaching the command
  std::string detach_note;    // printed on a detach
};

// Runs the session to its end: the command's exit status, 130 after a detach, 255 when the
// connection was lost before the status came.
int RunClientSession(ByteStream& stream, const SessionIo& io, std::ostream& err);

// The terminal's size (columns, rows), or 80x24 when stdout is not one.
void TerminalSize(int* cols, int* rows);

}  // namespace gantry
