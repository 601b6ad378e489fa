// YamlReader: reads one YAML map field by field, remembering the first error with its
// full field path and refusing fields it was never asked about (typos must not pass).
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
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

// Parses YAML (or JSON) text; a syntax error names `field` and the line.
inline Expected<YAML::Node> LoadYaml(const std::string& text, const std::string& field,
                                     const char* what = "malformed YAML") {
  try {
    // One document only: a second one would be silently ignored by YAML::Load.
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.size() > 1)
      return Status::Invalid(field, fmt::format("{}: {} documents, expected one", what, docs.size()));
    return docs.empty() ? YAML::Node() : docs[0];
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
        if (!kv.first.IsScalar()) return Status::Invalid(path_, "keys must be plain names");
        std::string key = kv.first.Scalar();
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
