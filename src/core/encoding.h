// Small encodings both sides of the API share: token hashes (users.yaml keeps SHA-256 of
// each token, never the token), fresh random tokens, and Base64 for bytes inside JSON (log
// chunks). The hashes, tokens and Base64 load OpenSSL (encoding.cc); the text checks below
// do not (text_encoding.cc).
#pragma once

#include <string>

namespace gantry {

// Lower-case hex SHA-256 of `text`.
std::string Sha256Hex(const std::string& text);
// A fresh random token: "gtk_" and 43 characters of URL-safe base64 (256 bits).
std::string NewToken();

// Base64 (RFC 4648), for bytes in JSON; Decode is false on text that is not Base64.
std::string Base64Encode(const std::string& bytes);
bool Base64Decode(const std::string& text, std::string* bytes);

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF included), or -1 when all of it is.
long InvalidUtf8At(const std::string& text);

// Percent-encodes a URL query value (RFC 3986: all but letters, digits and -_.~).
std::string UrlEncode(const std::string& value);

// A CSV text cell (RFC 4180): quoted when it holds a separator, a quote or a line break,
// and never read as a formula by a spreadsheet (a leading = + - @ TAB or CR gets a ' in
// front, as OWASP advises for CSV injection).
std::string CsvField(const std::string& text);

}  // namespace gantry
