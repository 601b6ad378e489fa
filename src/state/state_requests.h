// The value types of the state machine's requests and answers, shared with its callers
// (the Controller, the HTTP layer, the presenter): what a request asks (a page, a filter,
// a window) and what a change answers (a submit, the jobs a change touched, a run placed
// on a node, a session's target). No behaviour here.
#pragma once

#include <compare>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "protocol/node_link.h"

namespace gantry {

// What the controller answers a request with: a JSON body, or the Status saying why not.
// Only the HTTP layer turns a Status into an HTTP status.
using Answer = Expected<nlohmann::json>;

// A submit's answer: the job, and whether this call created it (false: the replay of an
// earlier call with the same Idempotency-Key).
struct Submitted {
  nlohmann::json job;
  bool created = true;
};

// What a change to jobs did, for its answer (StateViews::Changed renders it): the job the
// caller named and, when the name stood for an array or a list of its tasks, those tasks
// and how many of them the change altered.
struct JobsChanged {
  std::string id;                  // as stored (a whole array's: its first task)
  std::string named;               // as the caller wrote it ("012", "12_[4-5]")
  std::vector<std::string> tasks;  // the tasks the name stood for, as stored; empty: one job
  size_t changed = 0;

  static JobsChanged One(std::string id, std::string named) {
    JobsChanged one;
    one.id = std::move(id);
    one.named = std::move(named);
    return one;
  }
};

// A job's run on one node, and the node's rank in it (its place in the job's placement):
// whose output that node sends.
struct PlacedRun {
  std::string job_id;
  int run = 0;
  int rank = 0;
  auto operator<=>(const PlacedRun&) const = default;
};

// Where an interactive session goes: a running job's run on one of its nodes.
struct StreamTarget {
  std::string job_id;    // as stored ("12"; an array task's own id)
  std::string shown_id;  // as users write it ("7_3" for an array task)
  int run = 1;
  std::string node_id;
  int node_rank = 0;
  NodeLink* link = nullptr;
  int port = 0;  // a port session's port on the node
  std::string owner;
  std::string team;
};

struct JobFilter {
  std::string state;  // empty: any; "active": pending, running or stopping
  std::string team;
  std::string user;
  TimeMs since_ms = -1;  // only jobs not ended before this (sacct -S); -1: any
  TimeMs until_ms = -1;  // only jobs submitted before this (sacct -E); -1: any
  int limit = 500;
  int offset = 0;      // matching jobs skipped (newest first) before the page
  std::string search;  // matches a job's id, or part of its name or user (case-insensitive)
  std::string names;   // only jobs with one of these names (comma-separated, as squeue --name)
};

// GET /v1/queue and GET /v1/nodes: one page of the list (limit 0: all), and for the queue
// only one team's jobs when `team` is set.
struct PageQuery {
  int limit = 0;
  int offset = 0;
  std::string team;
  bool telemetry = false;  // nodes: each GPU's latest reading
};

// GET /v1/usage: a window, an optional team, a grouping.
struct UsageQuery {
  TimeMs from = 0;
  TimeMs to = kNever;
  std::string team;
  std::string by = "team";
};

}  // namespace gantry
