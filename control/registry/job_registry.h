// The controller's picture of its jobs: the latest report of every node, when it arrived, and
// what follows from the reports (staleness, seconds per step, the policy's measurements).
// Not thread-safe: the controller guards it with its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/policy/policy.h"
#include "control/registry/node_report.h"

namespace gradgate::control {

using Clock = std::chrono::steady_clock;

struct NodeState {
  NodeReport report;
  Clock::time_point last_seen;
};

struct JobState {
  uint32_t nodes = 1;
  std::map<uint32_t, NodeState> members;   // by node index, < nodes
  std::vector<TensorSample> tensors;       // from the latest report that had any
  std::optional<double> seconds_per_step;  // from the step counters of successive reports
};

/// What recording a report changed that is worth a log line.
struct RecordNotes {
  bool new_job = false;
  std::optional<std::string> replaced_address;  // another gateway held this (job, node)
  std::optional<uint32_t> resized_from;         // the job's size changed from this
};

class JobRegistry {
 public:
  explicit JobRegistry(std::chrono::milliseconds stale_after) : stale_after_(stale_after) {}

  /// Stores `report` as the node's latest (it replaces the previous one). A report with another
  /// job size resizes the job (the newer gateway wins) and drops nodes beyond the new size.
  RecordNotes record(NodeReport report, Clock::time_point now);

  const std::map<uint64_t, JobState>& jobs() const { return jobs_; }
  const JobState* find(uint64_t job_id) const;

  bool is_stale(const NodeState& node, Clock::time_point now) const {
    return now - node.last_seen > stale_after_;
  }
  /// The largest step reported by the job's nodes.
  static uint64_t max_step(const JobState& job);
  /// The largest policy version the job's nodes apply or hold (they may know versions of a
  /// controller that ran before this one).
  static uint64_t max_known_version(const JobState& job);

  /// Removes the jobs none of whose nodes reported within `silence` before `now`; returns their
  /// ids.
  std::vector<uint64_t> forget_silent(Clock::time_point now, std::chrono::milliseconds silence);

  /// The policy's input for a job: its step and size; each node's data volume (the sum over its
  /// workers, 1 when that is 0); the links measured by nodes that are not stale; the tensors of
  /// the latest report that had any; codec speeds averaged over the nodes that measured them.
  Measurements measurements(const JobState& job, Clock::time_point now) const;

 private:
  std::chrono::milliseconds stale_after_;
  std::map<uint64_t, JobState> jobs_;
};

}  // namespace gradgate::control
