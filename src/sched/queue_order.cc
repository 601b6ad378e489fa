// Queue ordering by class, weighted score, submit time and id.
#include "sched/queue_order.h"

#include <algorithm>

namespace gantry {

double QueueScore(const PendingJob& job, const SchedulerConfig& config, TimeMs now_ms, int largest_node_gpus) {
  double age =
      std::clamp(static_cast<double>(now_ms - job.submit_ms) / static_cast<double>(config.age_max_ms), 0.0, 1.0);
  double size = 0;
  if (largest_node_gpus > 0) {
    const GpuRequest& r = job.spec->request;
    double gpus = r.sharing == SharingMode::kExclusive ? r.gpus : r.gpu_milli / 1000.0;
    size = std::min(1.0, gpus / largest_node_gpus);
  }
  return config.age_weight * age + config.size_weight * size;
}

QueueEntry MakeQueueEntry(const std::vector<PendingJob>& pending, size_t index, const SchedulerConfig& config,
                          TimeMs now_ms, int largest_node_gpus) {
  const PendingJob& job = pending[index];
  int c = config.FindClass(job.spec->priority_class);
  int rank = c < 0 ? INT32_MIN : config.class_tiers ? config.priority_classes[c].rank : 0;
  return {index, rank, QueueScore(job, config, now_ms, largest_node_gpus), job.submit_ms};
}

std::vector<QueueEntry> OrderQueue(const std::vector<PendingJob>& pending, const SchedulerConfig& config, TimeMs now_ms,
                                   int largest_node_gpus, bool sorted) {
  std::vector<QueueEntry> order;
  order.reserve(pending.size());
  // Class names repeat: remember the last lookup.
  const std::string* last_name = nullptr;
  int last_rank = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    const PendingJob& job = pending[i];
    if (!last_name || *last_name != job.spec->priority_class) {
      last_rank = MakeQueueEntry(pending, i, config, now_ms, largest_node_gpus).class_rank;
      last_name = &job.spec->priority_class;
    }
    order.push_back({i, last_rank, QueueScore(job, config, now_ms, largest_node_gpus), job.submit_ms});
  }
  if (sorted) {
    std::sort(order.begin(), order.end(),
              [&](const QueueEntry& a, const QueueEntry& b) { return QueueBefore(a, b, pending); });
  }
  return order;
}

}  // namespace gantry
