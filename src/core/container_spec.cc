// Container fields of a job spec.
#include "core/container_spec.h"

#include <fmt/format.h>

#include <algorithm>

namespace gantry {

namespace {

bool IsCleanAbsolutePath(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.size() > 4096) return false;
  if (std::any_of(p.begin(), p.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == ','; })) {
    return false;
  }
  // No "." or ".." components: what is checked is what is mounted.
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    std::string part = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part == "." || part == "..") return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return true;
}

std::string WithoutTrailingSlash(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

const char* ToString(PullPolicy p) {
  switch (p) {
    case PullPolicy::kMissing: return "missing";
    case PullPolicy::kAlways: return "always";
    case PullPolicy::kNever: return "never";
  }
  return "missing";
}

bool ParsePullPolicy(const std::string& text, PullPolicy* out) {
  for (PullPolicy p : {PullPolicy::kMissing, PullPolicy::kAlways, PullPolicy::kNever}) {
    if (text == ToString(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

Expected<ContainerMount> ParseMount(const std::string& text, const std::string& field) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1) {
    parts.push_back(text.substr(start, colon - start));
  }
  parts.push_back(text.substr(start));
  ContainerMount m;
  if (parts.size() == 3) {
    if (parts[2] != "ro" && parts[2] != "rw")
      return Status::Invalid(field, "the mode after the second ':' is ro or rw");
    m.read_only = parts[2] == "ro";
  } else if (parts.size() != 2) {
    return Status::Invalid(field, fmt::format("'{}' is not HOST:CONTAINER[:ro]", text));
  }
  if (!IsCleanAbsolutePath(parts[0]) || !IsCleanAbsolutePath(parts[1])) {
    return Status::Invalid(field, "both paths must be absolute, without '..', ',' or control characters");
  }
  m.host = WithoutTrailingSlash(parts[0]);
  m.container = WithoutTrailingSlash(parts[1]);
  return m;
}

Status ValidateContainerSpec(const ContainerSpec& c) {
  if (!c.enabled()) {
    if (!c.mounts.empty() || !c.workdir.empty() || !c.env.empty()) {
      return Status::Invalid("container_image",
                             "is required with container_mounts, container_workdir or container_env");
    }
    return Status::Ok();
  }
  const std::string& image = c.image;
  if (image.size() > 255 || image[0] == '-' ||
      image.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") !=
          std::string::npos) {
    return Status::Invalid(
        "container_image",
        fmt::format("'{}' is not an image reference (registry/name:tag: letters, digits, . _ - / : @)",
                    image.substr(0, 80)));
  }
  if (c.mounts.size() > 32) return Status::Invalid("container_mounts", "at most 32 mounts");
  for (size_t i = 0; i < c.mounts.size(); ++i) {
    if (auto m = ParseMount(c.mounts[i], fmt::format("container_mounts[{}]", i)); !m) return m.status();
  }
  if (!c.workdir.empty() && !IsCleanAbsolutePath(c.workdir)) {
    return Status::Invalid("container_workdir", "must be an absolute path without '..'");
  }
  return Status::Ok();
}

bool UnderAnyRoot(const std::string& host, const std::vector<std::string>& roots) {
  for (const std::string& r : roots) {
    std::string root = WithoutTrailingSlash(r);
    if (root == "/" || host == root || host.rfind(root + "/", 0) == 0) return true;
  }
  return false;
}

}  // namespace gantry
