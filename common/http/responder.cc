#include "common/http/responder.h"

#include <atomic>

namespace gradgate::http {

struct Responder::State {
  std::atomic<bool> answered{false};
  Deliver deliver;
};

Responder::Responder(Deliver deliver) : state_(std::make_shared<State>()) {
  state_->deliver = std::move(deliver);
}

void Responder::operator()(Response response) const {
  if (state_->answered.exchange(true)) return;
  state_->deliver(std::move(response));
}

}  // namespace gradgate::http
