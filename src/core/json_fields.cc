// ObjectAt and the other readers of fields of untrusted JSON objects.
#include "core/json_fields.h"

namespace gantry {

const nlohmann::json& ObjectAt(const nlohmann::json& object, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  if (!object.is_object()) return empty;
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : empty;
}

const nlohmann::json& ArrayAt(const nlohmann::json& object, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  if (!object.is_object()) return empty;
  auto it = object.find(key);
  return it != object.end() && it->is_array() ? *it : empty;
}

std::string StringAt(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

bool BoolAt(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return false;
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

int64_t IntAt(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace gantry
