// YamlReader: reads one YAML map field by field, remembering the first error with its
// full field path and refusing fields it was never asked about (typos must not pass).
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/read_file.h"
#include "core/status.h"

namespace gantry {

// The whole file as text, or NotFound naming the path.
inline Expected<std::string> ReadTextFile(const std::string& path) {
  auto text = ReadFileNoThrow(path);
  if (!text) return Status::NotFound("cannot read " + path);
  return std::move(*text);
}

// True when `text` holds a second YAML document: a "---" line after content, or content
// after a "..." line. (Not YAML::LoadAll: yaml-cpp 0.7 loops forever in it on input as
// small as ",{", which the fuzzer found.)
inline bool HasSecondYamlDocument(const std::string& text) {
  bool content = false, ended = false;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto marker = [&](std::string_view m) {
      return line.substr(0, 3) == m && (line.size() == 3 || line[3] == ' ' || line[3] == '\t');
    };
    auto rest_is_content = [&] {
      size_t c = line.find_first_not_of(" \t", 3);
      return c != std::string_view::npos && line[c] != '#';
    };
    if (marker("---")) {
      if (content || ended) return true;
      content = rest_is_content();
    } else if (marker("...")) {
      ended = true;
    } else {
      size_t c = line.find_first_not_of(" \t");
      if (c == std::string_view::npos || line[c] == '#' || (c == 0 && line[0] == '%')) continue;
      if (ended) return true;
      content = true;
    }
  }
  return false;
}

// Parses YAML (or JSON) text; a syntax error names `field` and the line.
inline Expected<YAML::Node> LoadYaml(const std::string& text, const std::string& field,
                                     const char* what = "malformed YAML") {
  // One document only: a second one would be silently ignored by YAML::Load.
  if (HasSecondYamlDocument(text)) return Status::Invalid(field, fmt::format("{}: more than one document", what));
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::Invalid(field, fmt::format("{} at line {}: {}", what, e.mark.line + 1, e.msg));
  }
}

inline bool IsYamlBool(const std::string& s) {
  return s == "true" || s == "false" || s == "True" || s == "False" || s == "TRUE" || s == "FALSE";
}

class YamlReader {
 public:
  YamlReader(YAML::Node node, std::string path) : node_(std::move(node)), path_(std::move(path)) {
    if (node_ && !node_.IsMap() && !node_.IsNull()) Fail(path_, "must be a map");
  }

  template <typename T>
  T Required(const std::string& key) {
    return Read<T>(key, T{}, true);
  }
  template <typename T>
  T Optional(const std::string& key, T fallback) {
    return Read<T>(key, std::move(fallback), false);
  }
  // A nested node (map or list) to parse separately; null when absent.
  YAML::Node Child(const std::string& key) {
    seen_.insert(key);
    return node_ && node_.IsMap() ? node_[key] : YAML::Node();
  }
  std::string PathOf(const std::string& key) const { return path_ + "." + key; }

  void Fail(std::string field, std::string message) {
    if (error_.ok()) error_ = Status::Invalid(std::move(field), std::move(message));
  }
  // The first error, or an "unknown field" error, or OK.
  Status Finish() {
    if (!error_.ok()) return error_;
    if (node_ && node_.IsMap()) {
      std::set<std::string> keys;
      for (const auto& kv : node_) {
        if (!kv.first.IsScalar()) return Status::Invalid(path_.empty() ? "body" : path_, "keys must be plain names");
        std::string key = kv.first.Scalar();
        if (key.empty()) return Status::Invalid(path_.empty() ? "body" : path_, "a field name is empty");
        if (!keys.insert(key).second) return Status::Invalid(PathOf(key), "is given twice");
        if (!seen_.count(key)) return Status::Invalid(PathOf(key), "unknown field");
      }
    }
    return Status::Ok();
  }

 private:
  template <typename T>
  T Read(const std::string& key, T fallback, bool required) {
    seen_.insert(key);
    if (!node_ || !node_.IsMap()) {
      if (required) Fail(PathOf(key), "is required");
      return fallback;
    }
    YAML::Node v = node_[key];
    if (!v || v.IsNull()) {
      if (required) Fail(PathOf(key), "is required");
      return fallback;
    }
    if constexpr (std::is_arithmetic_v<T>) {
      // A quoted scalar ("2", "yes") is a string, as in JSON; booleans are true or false
      // only (not YAML 1.1's yes/no/on/off).
      bool quoted = v.IsScalar() && v.Tag() == "!";
      bool bad_bool = std::is_same_v<T, bool> && v.IsScalar() && !IsYamlBool(v.Scalar());
      if (quoted || bad_bool) {
        Fail(PathOf(key), fmt::format("has the wrong type (line {}): expected {}", v.Mark().line + 1,
                                      std::is_same_v<T, bool> ? "true or false" : "a number"));
        return fallback;
      }
    }
    try {
      return v.as<T>();
    } catch (const YAML::Exception&) {
      Fail(PathOf(key), fmt::format("has the wrong type (line {})", v.Mark().line + 1));
      return fallback;
    }
  }

  YAML::Node node_;
  std::string path_;
  std::set<std::string> seen_;
  Status error_;
};

}  // namespace gantry
