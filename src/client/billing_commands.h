// The accounting subcommands of `gantry`: usage, report (text, json, csv, html), budgets
// and alerts.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "client/http_client.h"

namespace gantry {

// What every client subcommand shares (built by AddClientCommands): the common flags, the
// request-and-print helper, and where the chosen command's action goes.
struct ClientPlumbing {
  std::function<void(CLI::App*)> common;
  std::function<int(std::function<Expected<HttpAnswer>(ApiClient&)>, std::function<void(const nlohmann::json&)>)>
      request;
  std::shared_ptr<std::function<int()>> chosen;
  // For commands that talk to the server more than once: the resolved-on-use config, the
  // output format, and the words after "--" (a job's command).
  std::shared_ptr<ClientConfig> cfg;
  std::shared_ptr<std::string> output;
  std::shared_ptr<std::vector<std::string>> command;
  // Whether the command of this name is to be defined (AddClientCommands' `only`).
  std::function<bool(std::string_view)> wants;
};

void AddBillingCommands(CLI::App& app, std::ostream& out, const ClientPlumbing& plumbing);

}  // namespace gantry
