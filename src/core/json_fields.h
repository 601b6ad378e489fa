// Fields of JSON objects written by others (Kubernetes API objects, traces of them), read
// without trusting their types: a field that is missing or of another type reads as empty
// (an object, an array, "", false, 0), never as an exception.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace gantry {

const nlohmann::json& ObjectAt(const nlohmann::json& object, const char* key);
const nlohmann::json& ArrayAt(const nlohmann::json& object, const char* key);
std::string StringAt(const nlohmann::json& object, const char* key);
bool BoolAt(const nlohmann::json& object, const char* key);
int64_t IntAt(const nlohmann::json& object, const char* key);

}  // namespace gantry
