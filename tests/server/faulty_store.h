// A store that fails on command, in front of a real one (SQLite): the test sets what goes
// wrong (the next commit fails, every commit is slow, reads fail) through StoreFaults, which
// it keeps while the controller owns the store. Modelled on LevelDB's SpecialEnv.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/store.h"

namespace gantry::testing {

struct StoreFaults {
  std::atomic<int> fail_commits{0};       // the next N commits fail (and write nothing)
  std::atomic<int> commit_delay_ms{0};    // each commit takes this long first (a slow disk)
  std::atomic<bool> fail_reads{false};    // every read but Load fails
  std::atomic<int> commits{0};            // commits that reached the store
  std::atomic<int> batches_committed{0};  // of them, those that wrote
};

class FaultyStore : public Store {
 public:
  FaultyStore(std::unique_ptr<Store> real, std::shared_ptr<StoreFaults> faults)
      : real_(std::move(real)), faults_(std::move(faults)) {}

  Status Commit(const StoreBatch& batch) override {
    faults_->commits++;
    if (int ms = faults_->commit_delay_ms.load(); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    for (int n = faults_->fail_commits.load(); n > 0;) {
      if (faults_->fail_commits.compare_exchange_weak(n, n - 1))
        return Status(StatusCode::kUnavailable, "the disk is full (a fault the test set)");
    }
    Status s = real_->Commit(batch);
    if (s.ok()) faults_->batches_committed++;
    return s;
  }
  Expected<StoredState> Load() override { return real_->Load(); }
  Expected<std::vector<JobEvent>> Events(const std::string& job_id) override {
    if (Status s = Read(); !s.ok()) return s;
    return real_->Events(job_id);
  }
  Expected<std::vector<NodeEvent>> NodeEvents(const std::string& node_id, int limit) override {
    if (Status s = Read(); !s.ok()) return s;
    return real_->NodeEvents(node_id, limit);
  }
  Expected<std::vector<AuditRecord>> Audit(int limit) override {
    if (Status s = Read(); !s.ok()) return s;
    return real_->Audit(limit);
  }
  Expected<std::vector<Allocation>> Allocations(TimeMs from, TimeMs to) override {
    if (Status s = Read(); !s.ok()) return s;
    return real_->Allocations(from, to);
  }
  Expected<std::vector<Allocation>> OpenAllocations() override { return real_->OpenAllocations(); }
  Expected<std::vector<JobEvent>> EventsOfKinds(const std::vector<std::string>& kinds, TimeMs to) override {
    if (Status s = Read(); !s.ok()) return s;
    return real_->EventsOfKinds(kinds, to);
  }
  Expected<std::vector<HistoryRow>> History(TimeMs from, TimeMs to) override {
    if (Status s = Read(); !s.ok()) return s;
    return real_->History(from, to);
  }
  int schema_version() const override { return real_->schema_version(); }

 private:
  Status Read() const {
    return faults_->fail_reads ? Status(StatusCode::kUnavailable, "the store does not answer (a fault the test set)")
                               : Status::Ok();
  }
  std::unique_ptr<Store> real_;
  std::shared_ptr<StoreFaults> faults_;
};

}  // namespace gantry::testing
