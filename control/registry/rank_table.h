// Node ranks handed out by name (POST /v1/jobs/{id}/ranks): gateways that share one
// configuration (a Kubernetes DaemonSet) cannot know their rank, so each claims one under a
// stable name (its node's name) and then reports with it like any other gateway.
//
// Per job: a name keeps its rank while it holds it (a restarted gateway gets its rank back) and
// every claim refreshes its time. A new name gets the lowest rank below the job's size that no
// live holder has. A holder is live while its claim is younger than `stale_after` or a gateway
// reports at its rank without being stale; a rank nobody claimed is taken while a gateway reports
// at it (one started with a fixed rank, or one that claimed before the controller restarted). A
// dead holder's rank goes to the next new name, and the dead holder loses it. A claim with
// another job size resizes the job's table (the newer claim wins): holders at ranks at or above
// the new size lose their rank.
//
// Not thread-safe: the controller guards it with its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "gradgate/base/status.h"

namespace gradgate::control {

/// The outcome of a claim and what it changed that is worth a log line.
struct RankClaim {
  uint32_t rank = 0;
  bool new_assignment = false;           // the name held no rank before this claim
  std::optional<std::string> took_from;  // the dead holder that lost `rank` to this name
  std::optional<uint32_t> resized_from;  // the job's size in the table before this claim
};

class RankTable {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RankTable(std::chrono::milliseconds stale_after) : stale_after_(stale_after) {}

  /// Claims a rank of job `job_id` of `nodes` ranks for `name`. `reported_live` holds the ranks
  /// at which a gateway of the job reports and is not stale. kResourceExhausted, naming the job
  /// and the holders, when every rank is held by another live holder; kInvalidArgument for an
  /// empty name or zero nodes.
  Result<RankClaim> claim(uint64_t job_id, const std::string& name, uint32_t nodes,
                          const std::set<uint32_t>& reported_live, Clock::time_point now);

  /// Drops the claims of every job that `reported` says no gateway reports for and whose newest
  /// claim was made before `before`: jobs that are gone, or that never got as far as reporting.
  void forget_unreported(Clock::time_point before, const std::function<bool(uint64_t)>& reported);

  /// The name that holds `rank` of the job, live or not; nullptr when none does.
  const std::string* holder_of(uint64_t job_id, uint32_t rank) const;

  /// Whether the table holds claims of the job, and of how many jobs it holds claims.
  bool knows(uint64_t job_id) const { return jobs_.contains(job_id); }
  std::size_t job_count() const { return jobs_.size(); }

 private:
  struct Holder {
    uint32_t rank = 0;
    Clock::time_point claimed;
  };
  struct JobRanks {
    uint32_t nodes = 0;
    std::map<std::string, Holder, std::less<>> by_name;
    std::map<uint32_t, std::string> by_rank;
  };

  /// Whether `rank` is taken for a new name: by a live holder, or by a live report when no name
  /// holds it.
  bool is_taken(const JobRanks& job, uint32_t rank, const std::set<uint32_t>& reported_live,
                Clock::time_point now) const;
  /// The problem of a claim that finds every rank taken.
  static Status all_taken(uint64_t job_id, const JobRanks& job);

  std::chrono::milliseconds stale_after_;
  std::map<uint64_t, JobRanks> jobs_;
};

}  // namespace gradgate::control
