#include "control/registry/rank_table.h"

#include <algorithm>

namespace gradgate::control {
namespace {

// The most holders a "all ranks taken" problem names; a larger job's list ends with a count.
constexpr uint32_t kMaxNamedHolders = 16;

}  // namespace

Result<RankClaim> RankTable::claim(uint64_t job_id, const std::string& name, uint32_t nodes,
                                   const std::set<uint32_t>& reported_live, Clock::time_point now) {
  if (name.empty() || nodes == 0) {
    return Status(ErrorCode::kInvalidArgument, "a rank claim needs a name and at least one node");
  }
  RankClaim claimed;
  auto [entry, inserted] = jobs_.try_emplace(job_id);
  JobRanks& job = entry->second;
  if (!inserted && job.nodes != nodes) claimed.resized_from = job.nodes;
  if (job.nodes != nodes) {
    job.nodes = nodes;
    std::erase_if(job.by_name, [&](const auto& holder) { return holder.second.rank >= nodes; });
    job.by_rank.erase(job.by_rank.lower_bound(nodes), job.by_rank.end());
  }

  if (const auto held = job.by_name.find(name); held != job.by_name.end()) {
    held->second.claimed = now;
    claimed.rank = held->second.rank;
    return claimed;
  }
  uint32_t rank = 0;
  while (rank < nodes && is_taken(job, rank, reported_live, now)) ++rank;
  if (rank == nodes) return all_taken(job_id, job);

  if (const auto dead = job.by_rank.find(rank); dead != job.by_rank.end()) {
    claimed.took_from = dead->second;
    job.by_name.erase(dead->second);
    job.by_rank.erase(dead);
  }
  job.by_name.emplace(name, Holder{.rank = rank, .claimed = now});
  job.by_rank.emplace(rank, name);
  claimed.rank = rank;
  claimed.new_assignment = true;
  return claimed;
}

void RankTable::forget_unreported(Clock::time_point before,
                                  const std::function<bool(uint64_t)>& reported) {
  std::erase_if(jobs_, [&](const auto& entry) {
    const auto& holders = entry.second.by_name;
    return !reported(entry.first) &&
           std::all_of(holders.begin(), holders.end(),
                       [&](const auto& holder) { return holder.second.claimed < before; });
  });
}

const std::string* RankTable::holder_of(uint64_t job_id, uint32_t rank) const {
  const auto job = jobs_.find(job_id);
  if (job == jobs_.end()) return nullptr;
  const auto holder = job->second.by_rank.find(rank);
  return holder == job->second.by_rank.end() ? nullptr : &holder->second;
}

bool RankTable::is_taken(const JobRanks& job, uint32_t rank,
                         const std::set<uint32_t>& reported_live, Clock::time_point now) const {
  if (reported_live.contains(rank)) return true;
  const auto holder = job.by_rank.find(rank);
  if (holder == job.by_rank.end()) return false;
  return now - job.by_name.find(holder->second)->second.claimed <= stale_after_;
}

Status RankTable::all_taken(uint64_t job_id, const JobRanks& job) {
  std::string holders;
  for (uint32_t rank = 0; rank < std::min(job.nodes, kMaxNamedHolders); ++rank) {
    const auto holder = job.by_rank.find(rank);
    // "?": a gateway reports at the rank without having claimed it by name.
    holders += (rank == 0 ? "" : ", ") +
               (holder == job.by_rank.end() ? std::string("?") : holder->second) + "=" +
               std::to_string(rank);
  }
  if (job.nodes > kMaxNamedHolders) {
    holders += ", ... (" + std::to_string(job.nodes - kMaxNamedHolders) + " more)";
  }
  return Status(ErrorCode::kResourceExhausted, "job " + std::to_string(job_id) + ": all " +
                                                   std::to_string(job.nodes) +
                                                   " ranks are held by live gateways: " + holders);
}

}  // namespace gradgate::control
