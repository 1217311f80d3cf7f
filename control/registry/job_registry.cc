#include "control/registry/job_registry.h"

#include <algorithm>

namespace gradgate::control {

RecordNotes JobRegistry::record(NodeReport report, Clock::time_point now) {
  RecordNotes notes;
  auto [job_entry, inserted] = jobs_.try_emplace(report.job_id);
  JobState& job = job_entry->second;
  notes.new_job = inserted;
  if (inserted) {
    job.nodes = report.nodes;
  } else if (job.nodes != report.nodes) {
    notes.resized_from = job.nodes;
    job.nodes = report.nodes;
    std::erase_if(job.members, [&](const auto& member) { return member.first >= job.nodes; });
  }
  if (!report.tensors.empty()) job.tensors = report.tensors;

  // The gateway's own split of its steps adds up to its seconds per step: known from its first
  // report, even when this controller has just (re)started.
  const StepTimings& t = report.timings;
  const double measured =
      t.compute_seconds + t.encode_seconds + t.communicate_seconds + t.decode_seconds;
  if (t.steps > 0 && measured > 0) job.seconds_per_step = measured;
  auto [member, first_report] = job.members.try_emplace(report.node);
  NodeState& node = member->second;
  if (!first_report) {
    if (node.report.address != report.address) notes.replaced_address = node.report.address;
    const uint64_t previous_step = node.report.step;
    const double elapsed = std::chrono::duration<double>(now - node.last_seen).count();
    if (!notes.replaced_address && report.step > previous_step && elapsed > 0 && t.steps == 0) {
      job.seconds_per_step = elapsed / static_cast<double>(report.step - previous_step);
    }
  }
  node.report = std::move(report);
  node.last_seen = now;
  return notes;
}

std::vector<uint64_t> JobRegistry::forget_silent(Clock::time_point now,
                                                 std::chrono::milliseconds silence) {
  std::vector<uint64_t> forgotten;
  std::erase_if(jobs_, [&](const auto& entry) {
    const auto& members = entry.second.members;
    const bool silent = std::all_of(members.begin(), members.end(), [&](const auto& member) {
      return now - member.second.last_seen > silence;
    });
    if (silent) forgotten.push_back(entry.first);
    return silent;
  });
  return forgotten;
}

const JobState* JobRegistry::find(uint64_t job_id) const {
  const auto found = jobs_.find(job_id);
  return found == jobs_.end() ? nullptr : &found->second;
}

uint64_t JobRegistry::max_step(const JobState& job) {
  uint64_t step = 0;
  for (const auto& [index, node] : job.members) step = std::max(step, node.report.step);
  return step;
}

uint64_t JobRegistry::max_known_version(const JobState& job) {
  uint64_t version = 0;
  for (const auto& [index, node] : job.members) {
    version = std::max({version, node.report.policy_version, node.report.received_policy_version});
  }
  return version;
}

Measurements JobRegistry::measurements(const JobState& job, Clock::time_point now) const {
  Measurements measured{.step = max_step(job), .nodes = job.nodes, .tensors = job.tensors};
  struct SpeedSum {
    double encode = 0.0;
    double decode = 0.0;
    int samples = 0;
  };
  std::map<std::string, SpeedSum> speeds;
  for (const auto& [index, node] : job.members) {
    double volume = 0.0;
    for (const WorkerReport& worker : node.report.workers) volume += worker.data_volume;
    // A gateway whose workers report no data volume has no sample: dagc keeps the uniform plan.
    if (volume > 0) measured.node_samples.push_back({.node = index, .data_volume = volume});
    for (const CodecSpeed& speed : node.report.codec_speeds) {
      SpeedSum& sum = speeds[speed.codec];
      sum.encode += speed.encode_bytes_per_second;
      sum.decode += speed.decode_bytes_per_second;
      ++sum.samples;
    }
    if (is_stale(node, now)) continue;
    for (const LinkReport& link : node.report.links) {
      if (link.peer >= job.nodes) continue;  // measured before the job shrank
      measured.links.push_back({.from_node = link.peer,
                                .to_node = index,
                                .goodput_bytes_per_second = link.goodput_bytes_per_second,
                                .rtt_seconds = link.rtt_seconds});
    }
  }
  for (const auto& [codec, sum] : speeds) {
    measured.codec_speeds.push_back({.codec = codec,
                                     .encode_bytes_per_second = sum.encode / sum.samples,
                                     .decode_bytes_per_second = sum.decode / sum.samples});
  }
  return measured;
}

}  // namespace gradgate::control
