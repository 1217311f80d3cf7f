#include "gateway/telemetry/control_client.h"

#include <spdlog/spdlog.h>

#include <string>

namespace gradgate::gateway {

ControlClient::ControlClient(ControlClientOptions options, Gateway& gateway)
    : options_(std::move(options)), gateway_(gateway) {}

ControlClient::~ControlClient() { stop(); }

void ControlClient::start() {
  thread_ = std::thread([this] { follow_policies(); });
}

void ControlClient::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stopping_changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ControlClient::record(const Status& exchange) {
  const bool failed = !exchange.ok();
  if (fail_static_.exchange(failed) != failed) {
    if (failed) {
      spdlog::warn("controller unreachable, keeping the current policy (fail-static): {}",
                   exchange.to_string());
    } else {
      spdlog::info("controller reachable again");
    }
  }
}

Status ControlClient::report(const nlohmann::json& body) {
  auto answer = http::send_request(options_.server, http::verb::post, "/v1/nodes", body.dump());
  Status status = answer.status();
  if (answer.ok() && answer->status != 200) {
    status = Status(ErrorCode::kUnavailable, "the controller answered the report with " +
                                                 std::to_string(answer->status) + ": " +
                                                 answer->body.substr(0, 500));
  }
  record(status);
  return status;
}

void ControlClient::follow_policies() {
  uint32_t known_version = 0;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    const Status polled = poll_once(known_version);
    record(polled);
    lock.lock();
    if (!polled.ok()) {
      stopping_changed_.wait_for(lock, options_.retry_delay, [this] { return stopping_; });
    }
  }
}

Status ControlClient::poll_once(uint32_t& known_version) {
  http::ClientOptions server = options_.server;
  server.timeout += options_.poll_wait;  // the controller may hold the answer that long
  const std::string target = "/v1/policy?job_id=" + std::to_string(options_.job_id) +
                             "&known_version=" + std::to_string(known_version) +
                             "&wait_ms=" + std::to_string(options_.poll_wait.count());
  auto answer = http::send_request(server, http::verb::get, target);
  if (!answer.ok()) return answer.status();
  if (answer->status == 404) return {};  // the job is not known yet: no policy to follow
  if (answer->status != 200) {
    return Status(ErrorCode::kUnavailable, "the controller answered " + target + " with " +
                                               std::to_string(answer->status) + ": " +
                                               answer->body.substr(0, 500));
  }
  const auto policy = nlohmann::json::parse(answer->body, nullptr, false);
  if (policy.is_discarded()) {
    return Status(ErrorCode::kMalformedFrame, "the controller's policy is not JSON");
  }
  return take_policy(policy, known_version);
}

Status ControlClient::take_policy(const nlohmann::json& policy, uint32_t& known_version) {
  try {
    const auto version = policy.at("version").get<uint32_t>();
    if (policy.contains("target_ratio") && policy.at("target_ratio").is_number()) {
      target_ratio_ = policy.at("target_ratio").get<double>();
    }
    if (version <= known_version) return {};
    CodecPolicy codecs{version, policy.at("effective_step").get<uint64_t>(), {}};
    for (const auto& tensor : policy.at("tensors")) {
      const auto& per_node = tensor.at("codec_per_node");
      codecs.codec_by_tensor[tensor.at("name").get<std::string>()] =
          options_.node < per_node.size() ? per_node.at(options_.node).get<std::string>()
                                          : tensor.at("codec").get<std::string>();
    }
    GRADGATE_RETURN_IF_ERROR(gateway_.set_policy(std::move(codecs)));
    known_version = version;
    return {};
  } catch (const nlohmann::json::exception& error) {
    return Status(ErrorCode::kMalformedFrame,
                  std::string("the controller's policy lacks a field: ") + error.what());
  }
}

}  // namespace gradgate::gateway
