#include "gateway/ingress/joining_handler.h"

namespace gradgate::gateway {

void JoiningHandler::set_stage(std::string stage) {
  std::lock_guard lock(mutex_);
  stage_ = std::move(stage);
}

Result<JobInfo> JoiningHandler::on_worker_joined(uint32_t local_rank) {
  if (IngressHandler* gateway = gateway_.load()) return gateway->on_worker_joined(local_rank);
  std::lock_guard lock(mutex_);
  return Status(ErrorCode::kAborted, "the gateway is not serving yet: " + stage_);
}

void JoiningHandler::on_worker_left(uint32_t local_rank) {
  // A session refused at HELLO never joined, so only a served worker can leave.
  if (IngressHandler* gateway = gateway_.load()) gateway->on_worker_left(local_rank);
}

}  // namespace gradgate::gateway
