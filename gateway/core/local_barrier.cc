#include "gateway/core/local_barrier.h"

#include <algorithm>
#include <utility>

#include "gradgate/base/check.h"

namespace gradgate::gateway {

LocalBarrier::LocalBarrier(uint32_t local_workers)
    : waiting_(local_workers), in_step_(local_workers), departed_(local_workers) {}

size_t LocalBarrier::waiting() const {
  return static_cast<size_t>(std::count_if(waiting_.begin(), waiting_.end(),
                                           [](const Done& done) { return done != nullptr; }));
}

void LocalBarrier::ask(uint32_t rank, Done done) {
  GRADGATE_DCHECK(rank < waiting_.size() && !has_request(rank),
                  "a local worker has one request at a time");
  if (waiting() == 0) first_waiting_ = Clock::now();
  waiting_[rank] = std::move(done);
  if (waiting() == waiting_.size()) waiting_spread_ = Clock::now() - first_waiting_;
}

std::optional<uint32_t> LocalBarrier::departed() const {
  const auto gone = std::find(departed_.begin(), departed_.end(), true);
  if (gone == departed_.end()) return std::nullopt;
  return static_cast<uint32_t>(gone - departed_.begin());
}

void LocalBarrier::detach(uint32_t rank, bool had_buffer) {
  if (had_buffer) departed_[rank] = true;
  waiting_[rank] = nullptr;
  in_step_[rank] = nullptr;
}

std::optional<uint64_t> LocalBarrier::begin_step() {
  if (running_ || waiting() != waiting_.size()) return std::nullopt;
  in_step_.swap(waiting_);
  step_spread_ = waiting_spread_;
  running_ = true;
  return next_step_++;
}

void LocalBarrier::undo_begin(uint64_t step) {
  GRADGATE_DCHECK(running_ && step + 1 == next_step_, "only the step just begun is undone");
  running_ = false;
  waiting_.swap(in_step_);
  next_step_ = step;
}

std::vector<LocalBarrier::Done> LocalBarrier::end_step() {
  GRADGATE_DCHECK(running_, "a step ends after it began");
  std::vector<Done> done;
  for (auto& request : in_step_) {
    if (request) done.push_back(std::exchange(request, nullptr));
  }
  running_ = false;
  return done;
}

std::pair<uint64_t, std::vector<LocalBarrier::Done>> LocalBarrier::skip_step() {
  std::vector<Done> done;
  for (auto& request : waiting_) {
    if (request) done.push_back(std::exchange(request, nullptr));
  }
  return {next_step_++, std::move(done)};
}

std::optional<uint32_t> LocalBarrier::left_step() const {
  for (uint32_t rank = 0; rank < in_step_.size(); ++rank) {
    if (!in_step_[rank]) return rank;
  }
  return std::nullopt;
}

std::vector<bool> LocalBarrier::in_step() const {
  std::vector<bool> in(in_step_.size());
  for (size_t rank = 0; rank < in.size(); ++rank) in[rank] = in_step_[rank] != nullptr;
  return in;
}

bool LocalBarrier::overdue(Clock::time_point now, std::chrono::milliseconds timeout) const {
  return !running_ && waiting() != 0 && now - first_waiting_ >= timeout;
}

}  // namespace gradgate::gateway
