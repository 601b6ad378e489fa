// Parsing of --jobs-file.
#include "client/jobs_file.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

#include "core/yaml_util.h"

namespace gantry {

namespace {

// Splits one CSV line; double quotes protect commas ("" is a quote inside quotes).
Expected<std::vector<std::string>> SplitCsv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  if (quoted) return Status::Invalid("", "unterminated quote");
  for (std::string& f : out) {
    size_t b = f.find_first_not_of(" \t\r");
    size_t e = f.find_last_not_of(" \t\r");
    f = b == std::string::npos ? "" : f.substr(b, e - b + 1);
  }
  return out;
}

}  // namespace

std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,@%+") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

// One line's job, or why the line is wrong (the field named as "FILE line N: FIELD").
Expected<YAML::Node> ParseJobsLine(const std::vector<std::string>& f, const std::string& where) {
  if (f.size() != 5) {
    return Status::Invalid(where, fmt::format("expected 5 fields (priority,script,conda_env,arguments,allowed_gpus), "
                                              "got {}",
                                              f.size()));
  }
  YAML::Node spec(YAML::NodeType::Map);
  std::string priority = f[0];
  int p = 0;
  auto [ptr, ec] = std::from_chars(priority.data(), priority.data() + priority.size(), p);
  if (priority.empty()) {
    priority = "medium";
  } else if (ec == std::errc() && ptr == priority.data() + priority.size()) {
    priority = p <= 0 ? "low" : p == 1 ? "medium" : p == 2 ? "high" : "critical";
  }
  spec["priority"] = priority;
  if (f[1].empty()) return Status::Invalid(where + ": script", "is required");
  std::string runner;
  if (f[1].size() > 3 && f[1].substr(f[1].size() - 3) == ".py") runner = "python ";
  if (f[1].size() > 3 && f[1].substr(f[1].size() - 3) == ".sh") runner = "bash ";
  std::string command = runner + ShellQuote(f[1]);
  if (!f[3].empty()) command += " " + f[3];
  if (!f[2].empty()) command = "conda run --no-capture-output -n " + ShellQuote(f[2]) + " " + command;
  spec["command"] = command;
  spec["name"] = f[1].substr(f[1].find_last_of('/') + 1);
  std::string gpus = f[4];
  int count = 0;
  auto [gp, gec] = std::from_chars(gpus.data(), gpus.data() + gpus.size(), count);
  if (gpus.empty()) {
    spec["gpus"] = 1;
  } else if (gec == std::errc() && gp == gpus.data() + gpus.size()) {
    spec["gpus"] = count;  // the server refuses counts that make no sense, naming gpus
  } else if (gpus.find_first_not_of("0123456789;| ") == std::string::npos) {
    // GPU indices ("0;1", "3;"): those GPUs of a single-node server, one job GPU each.
    YAML::Node indices(YAML::NodeType::Sequence);
    std::string cur;
    for (char c : gpus + ";") {
      if (c == ';' || c == '|') {
        int index = 0;
        auto [ip, iec] = std::from_chars(cur.data(), cur.data() + cur.size(), index);
        if (!cur.empty() && (iec != std::errc() || ip != cur.data() + cur.size())) {
          return Status::Invalid(where + ": allowed_gpus", "'" + cur + "' is not a GPU index");
        }
        if (!cur.empty()) indices.push_back(index);
        cur.clear();
      } else if (c != ' ') {
        cur += c;
      }
    }
    spec["gpu_indices"] = indices;
  } else {
    YAML::Node types(YAML::NodeType::Sequence);
    std::string cur;
    for (char c : gpus + ";") {
      if (c == ';' || c == '|') {
        if (!cur.empty()) types.push_back(cur);
        cur.clear();
      } else if (c != ' ') {
        cur += c;
      }
    }
    spec["gpus"] = 1;
    spec["gpu_types"] = types;
  }
  return spec;
}

}  // namespace

Expected<std::vector<JobsFileLine>> ParseJobsText(const std::string& text, const std::string& name) {
  std::vector<JobsFileLine> out;
  std::vector<Status> bad;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string where = fmt::format("{} line {}", name, n);
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    auto fields = SplitCsv(line);
    if (!fields) {
      bad.push_back(Status::Invalid(where, fields.status().message()));
      continue;
    }
    if (out.empty() && bad.empty() && (*fields)[0] == "priority") continue;  // the header line
    auto spec = ParseJobsLine(*fields, where);
    if (!spec) {
      bad.push_back(spec.status());
      continue;
    }
    out.push_back({n, *spec});
  }
  // Every bad line is listed, and no line is submitted.
  if (!bad.empty()) {
    std::string all;
    for (const Status& s : bad) all += (all.empty() ? "" : "\n  ") + s.field() + ": " + s.message();
    if (bad.size() == 1) return bad[0];
    return Status::Invalid(bad[0].field(), fmt::format("{} bad lines, nothing submitted:\n  {}", bad.size(), all));
  }
  if (out.empty()) return Status::Invalid(name, "no jobs in the file");
  return out;
}

Expected<std::vector<JobsFileLine>> ParseJobsFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text) return text.status();
  return ParseJobsText(*text, path);
}

}  // namespace gantry
