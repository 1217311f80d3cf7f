#include "gateway/telemetry/control_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

namespace gradgate::gateway {

namespace {

ControlClientOptions cancelled_by(ControlClientOptions options, http::RequestCancel& cancel) {
  options.server.cancel = &cancel;
  return options;
}

}  // namespace

ControlClient::ControlClient(ControlClientOptions options, Gateway& gateway)
    : options_(cancelled_by(std::move(options), cancel_)), gateway_(gateway) {}

ControlClient::~ControlClient() { stop(); }

void ControlClient::start() {
  thread_ = std::thread([this] { follow_policies(); });
}

void ControlClient::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cancel_.cancel();
  stopping_changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ControlClient::note_reachable(Exchange exchange, const Status& answer) {
  if (answer.code() == ErrorCode::kAborted) return;  // cancelled by stop(): says nothing of it
  const bool unreachable = !answer.ok();
  if (unreachable) ++unanswered_[exchange];
  if (fail_static_.exchange(unreachable) == unreachable) return;
  if (unreachable) {
    spdlog::warn("controller unreachable, keeping the current policy (fail-static): {}",
                 answer.to_string());
  } else {
    spdlog::info("controller reachable");
  }
}

void ControlClient::note_refusal(Exchange exchange, const Status& why) {
  std::lock_guard lock(mutex_);
  if (why.message() == last_refusal_[exchange]) return;
  last_refusal_[exchange] = why.message();
  spdlog::warn("controller: {}", why.to_string());
}

ControlErrors ControlClient::errors() const {
  return {unauthorized_.load(), refused_.load(), unusable_policies_.load()};
}

ControlRequestFailures ControlClient::request_failures() const {
  return {unanswered_[kReport].load(), unanswered_[kPolicy].load()};
}

void ControlClient::note_error_answer(Exchange exchange, const http::ClientResponse& answer,
                                      const std::string& what) {
  const bool unauthorized = answer.status == 401 || answer.status == 403;
  ++(unauthorized ? unauthorized_ : refused_);
  Status why = http::expect_ok(answer, what);
  if (unauthorized) {
    why = Status(why.code(), why.message() +
                                 " (the controller wants another token: control.token_file or "
                                 "control.token_env, and its auth.token_file or auth.token_env)");
  }
  note_refusal(exchange, why);
}

Status ControlClient::report(const nlohmann::json& body) {
  const std::string what = "the report to the controller";
  auto answer = http::send_request(options_.server, http::verb::post, "/v1/nodes", body.dump());
  note_reachable(kReport, answer.status());
  if (!answer.ok()) return answer.status();
  if (answer->status != 200) {
    note_error_answer(kReport, *answer, what);
    return http::expect_ok(*answer, what);
  }
  note_asked_interval(*answer);
  return {};
}

void ControlClient::note_asked_interval(const http::ClientResponse& answer) {
  const auto reply = nlohmann::json::parse(answer.body, nullptr, false);
  const auto asked = reply.is_object() ? reply.find("report_interval_ms") : reply.end();
  if (asked == reply.end() || !asked->is_number_integer() || asked->get<int64_t>() <= 0) return;
  const int64_t milliseconds = asked->get<int64_t>();
  if (asked_interval_ms_.exchange(milliseconds) == milliseconds) return;
  spdlog::info("controller: expects a report every {} ms; reporting every {} ms", milliseconds,
               report_interval().count());
}

std::chrono::milliseconds ControlClient::report_interval() const {
  const int64_t asked = asked_interval_ms_.load();
  const auto own = options_.report_interval;
  const auto interval = asked > 0 ? std::min(own, std::chrono::milliseconds(asked)) : own;
  return std::max(interval, kShortestReportInterval);
}

void ControlClient::follow_policies() {
  uint32_t known_version = 0;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    const bool ask_again_now = poll_once(known_version);
    lock.lock();
    if (!ask_again_now) {
      const auto pause = std::min(options_.retry_delay, report_interval());
      stopping_changed_.wait_for(lock, pause, [this] { return stopping_; });
    }
  }
}

namespace {

// Whether `answer` is the 400 of a server that does not take query parameter `name`.
bool refuses_query_parameter(const http::ClientResponse& answer, std::string_view name) {
  if (answer.status != 400) return false;
  const auto problem = nlohmann::json::parse(answer.body, nullptr, false);
  return problem.is_object() && problem.value("field", "") == name;
}

}  // namespace

bool ControlClient::poll_once(uint32_t& known_version) {
  http::ClientOptions server = options_.server;
  server.timeout += options_.poll_wait;  // the controller may hold the answer that long
  std::string target = "/v1/policy?job_id=" + std::to_string(options_.job_id) +
                       "&known_version=" + std::to_string(known_version) +
                       "&wait_ms=" + std::to_string(options_.poll_wait.count());
  if (ask_node_view_) target += "&node=" + std::to_string(options_.node);
  auto answer = http::send_request(server, http::verb::get, target);
  note_reachable(kPolicy, answer.status());
  if (!answer.ok()) return false;
  if (answer->status == 404) return false;  // the job is not known yet: no policy to follow
  if (ask_node_view_ && refuses_query_parameter(*answer, "node")) {
    spdlog::info("controller: no per-node policy view (an older version); fetching whole policies");
    ask_node_view_ = false;
    return true;
  }
  if (answer->status != 200) {
    note_error_answer(kPolicy, *answer, "GET " + target);
    return false;
  }
  const auto policy = nlohmann::json::parse(answer->body, nullptr, false);
  const Status taken = policy.is_discarded() ? Status(ErrorCode::kInvalidArgument,
                                                      "the controller's policy is not JSON")
                                             : take_policy(policy, known_version);
  if (!taken.ok()) {
    ++unusable_policies_;
    note_refusal(kPolicy, taken);
  }
  return taken.ok();
}

Status ControlClient::take_policy(const nlohmann::json& policy, uint32_t& known_version) {
  try {
    const auto version = policy.at("version").get<uint32_t>();
    if (policy.contains("target_ratio") && policy.at("target_ratio").is_number()) {
      target_ratio_ = policy.at("target_ratio").get<double>();
    }
    if (version <= known_version) return {};
    if (policy.contains("node") && policy.at("node").get<uint32_t>() != options_.node) {
      return Status(ErrorCode::kInvalidArgument, "the controller sent the policy of node " +
                                                     policy.at("node").dump() + " to node " +
                                                     std::to_string(options_.node));
    }
    CodecPolicy codecs{version, policy.at("effective_step").get<uint64_t>(), {}};
    for (const auto& tensor : policy.at("tensors")) {
      // The whole policy lists every node's codec; this node's view only its own, as `codec`.
      const auto per_node = tensor.find("codec_per_node");
      const bool listed = per_node != tensor.end() && options_.node < per_node->size();
      codecs.codec_by_tensor[tensor.at("name").get<std::string>()] =
          listed ? per_node->at(options_.node).get<std::string>()
                 : tensor.at("codec").get<std::string>();
    }
    GRADGATE_RETURN_IF_ERROR(gateway_.set_policy(std::move(codecs)));
    known_version = version;
    return {};
  } catch (const nlohmann::json::exception& error) {
    return Status(ErrorCode::kInvalidArgument,
                  std::string("the controller's policy lacks a field: ") + error.what());
  }
}

}  // namespace gradgate::gateway
