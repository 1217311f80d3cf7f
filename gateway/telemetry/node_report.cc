#include "gateway/telemetry/node_report.h"

#include <algorithm>

namespace gradgate::gateway {

NodeReport::NodeReport(NodeIdentity identity)
    : identity_(std::move(identity)), last_report_(Clock::now()) {}

void NodeReport::observe(const StepRecord& step) {
  if (!step.status.ok()) return;
  std::lock_guard lock(mutex_);
  CodecTime& time = codec_times_[std::string(step.codec)];
  time.raw_bytes += static_cast<double>(step.fp32_bytes);
  time.encode_seconds += step.encode_seconds;
  time.decode_seconds += step.decode_seconds;
  encode_ += step.encode_seconds;
  communicate_ += step.communicate_seconds;
  decode_ += step.decode_seconds;
}

nlohmann::json NodeReport::registration(const NodeIdentity& identity, uint64_t step,
                                        uint32_t policy_version) {
  return {{"job_id", identity.job_id},       {"node", identity.node},   {"nodes", identity.nodes},
          {"address", identity.address},     {"admin", identity.admin}, {"step", step},
          {"policy_version", policy_version}};
}

nlohmann::json NodeReport::take(const Gateway& gateway, const GatewaySnapshot& now,
                                Clock::time_point at) {
  nlohmann::json tensors = nlohmann::json::array();
  uint64_t step = 0;
  for (const TensorInfo& tensor : gateway.tensors()) {
    tensors.push_back({{"name", tensor.name},
                       {"elements", tensor.elements},
                       {"rows", tensor.rows},
                       {"cols", tensor.cols}});
    // 16-bit tensors only: a controller before dtype takes the reports of fp32 jobs still.
    if (tensor.dtype != Dtype::kFp32) {
      tensors.back()["dtype"] = std::string(dtype_name(tensor.dtype));
    }
    step = std::max(step, tensor.steps);
  }
  nlohmann::json workers = nlohmann::json::array();
  const auto volumes = gateway.worker_data_volumes();
  for (uint32_t rank = 0; rank < volumes.size(); ++rank) {
    workers.push_back({{"local_rank", rank}, {"data_volume", volumes[rank]}});
  }
  nlohmann::json links = nlohmann::json::array();
  for (const LinkEstimate& link : now.links) {
    if (link.goodput_bytes_per_second <= 0.0) continue;  // not measured yet
    links.push_back({{"peer", link.peer},
                     {"goodput_bytes_per_second", link.goodput_bytes_per_second},
                     {"rtt_seconds", link.rtt_seconds},
                     {"age_seconds", link.age_seconds}});
  }

  std::lock_guard lock(mutex_);
  nlohmann::json speeds = nlohmann::json::array();
  for (const auto& [codec, time] : codec_times_) {
    if (time.encode_seconds <= 0.0 || time.decode_seconds <= 0.0) continue;
    speeds.push_back({{"codec", codec},
                      {"encode_bytes_per_second", time.raw_bytes / time.encode_seconds},
                      {"decode_bytes_per_second", time.raw_bytes / time.decode_seconds}});
  }
  const uint64_t steps = step - std::min(step, step_at_last_report_);
  const double interval = std::chrono::duration<double>(at - last_report_).count();
  const double per_step = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
  const double busy = (encode_ + communicate_ + decode_) * per_step;
  const nlohmann::json timings = {
      {"steps", steps},
      {"compute_seconds", steps > 0 ? std::max(0.0, interval * per_step - busy) : 0.0},
      {"encode_seconds", encode_ * per_step},
      {"communicate_seconds", communicate_ * per_step},
      {"decode_seconds", decode_ * per_step}};
  encode_ = communicate_ = decode_ = 0.0;
  step_at_last_report_ = step;
  last_report_ = at;
  nlohmann::json report = registration(identity_, step, now.core.applied_policy_version);
  report["received_policy_version"] = now.core.policy_version;
  report["fail_static"] = now.fail_static;
  report["links"] = std::move(links);
  report["workers"] = std::move(workers);
  report["tensors"] = std::move(tensors);
  report["codec_speeds"] = std::move(speeds);
  report["timings"] = timings;
  return report;
}

}  // namespace gradgate::gateway
