// Request framing as the event loop judges it (server/http_front.h): a request reaches a
// worker only once it is whole, or once it is sure to be refused without the rest (bad or
// doubled framing, a body over the limit, a body the gate would not read). Pure functions
// over the buffered bytes, so the framing rules are tested and fuzzed alone.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace gantry {

// Whether a request with this path and Authorization header may have its body read (no
// side effects: it runs on the event loop).
using BodyGate = std::function<bool(std::string_view path, std::string_view authorization)>;

struct RequestFraming {
  bool ready = false;              // hand it to a worker now
  bool chunks_over_limit = false;  // a chunked body passed the limit before it all came (413)
};

// Judges the request at the start of `buffered`: ready once its head and body are there, or
// at once when the worker will refuse it unread (two lengths or encodings, a malformed
// length, Content-Length with chunked, a body over `max_body`, a malformed chunk, or a body
// `gate` refuses).
RequestFraming AssessRequest(std::string_view buffered, size_t max_body, const BodyGate& gate);

}  // namespace gantry
