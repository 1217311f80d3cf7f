// ConnectionSlots on its own: which connection gives way when the slots are all taken (idle ones
// before closing ones, the longest waiting first, never one with unread input or one busy with a
// request), that an evicted connection's slot is not given back twice, and the refusals' bound.
#include "common/http/connection_slots.h"

#include <gtest/gtest.h>

#include <memory>

namespace gradgate::http {
namespace {

using Wait = ConnectionSlots::Wait;

struct FakeConnection : Evictable {
  bool has_input() const override { return input; }
  void evict() override { evicted = true; }
  bool input = false;
  bool evicted = false;
};

// A connection in a free slot, waiting as `wait` says.
std::shared_ptr<FakeConnection> waiting_in(ConnectionSlots& slots, Wait wait,
                                           ConnectionSlots::Ticket& ticket) {
  auto connection = std::make_shared<FakeConnection>();
  const auto taken = slots.take();
  EXPECT_TRUE(taken.has_value());
  ticket = taken.value_or(~0ull);
  slots.waiting(ticket, wait, connection);
  return connection;
}

TEST(ConnectionSlots, FreeSlotsFirstThenTheLongestIdle) {
  ConnectionSlots slots(2);
  ConnectionSlots::Ticket a = 0, b = 0;
  auto first = waiting_in(slots, Wait::kRequest, a);
  auto second = waiting_in(slots, Wait::kRequest, b);

  const auto c = slots.take();
  ASSERT_TRUE(c);
  EXPECT_TRUE(first->evicted);
  EXPECT_FALSE(second->evicted);
  slots.give_back(a);  // the evicted one's destructor: its slot went to c already
  slots.busy(b);
  EXPECT_FALSE(slots.take()) << "b and c are busy, and a's slot is c's";
}

TEST(ConnectionSlots, BusyConnectionsAndUnreadInputKeepTheirSlots) {
  ConnectionSlots slots(2);
  ConnectionSlots::Ticket a = 0, b = 0;
  auto busy = waiting_in(slots, Wait::kRequest, a);
  slots.busy(a);
  auto with_input = waiting_in(slots, Wait::kRequest, b);
  with_input->input = true;

  EXPECT_FALSE(slots.take());
  EXPECT_FALSE(busy->evicted);
  EXPECT_FALSE(with_input->evicted);

  slots.give_back(a);
  EXPECT_TRUE(slots.take()) << "a slot given back is free";
}

TEST(ConnectionSlots, IdleConnectionsGiveWayBeforeClosingOnes) {
  ConnectionSlots slots(2);
  ConnectionSlots::Ticket a = 0, b = 0;
  auto closing = waiting_in(slots, Wait::kClose, a);  // waiting longer, but closing after an answer
  auto idle = waiting_in(slots, Wait::kRequest, b);

  ASSERT_TRUE(slots.take());
  EXPECT_TRUE(idle->evicted);
  EXPECT_FALSE(closing->evicted);
  ASSERT_TRUE(slots.take());
  EXPECT_TRUE(closing->evicted);
}

TEST(ConnectionSlots, AConnectionGoneMeanwhileFreesItsSlot) {
  ConnectionSlots slots(1);
  const auto a = slots.take();
  ASSERT_TRUE(a);
  {
    auto gone = std::make_shared<FakeConnection>();
    slots.waiting(*a, Wait::kRequest, gone);
  }  // destroyed; its slot is given back only later, as on another thread
  EXPECT_FALSE(slots.take()) << "nothing to evict and no free slot yet";
  slots.give_back(*a);
  EXPECT_TRUE(slots.take());
}

TEST(ConnectionSlots, RefusalsAreBoundedByTheLimit) {
  ConnectionSlots slots(2);
  EXPECT_TRUE(slots.take_refusal());
  EXPECT_TRUE(slots.take_refusal());
  EXPECT_FALSE(slots.take_refusal());
  slots.give_back_refusal();
  EXPECT_TRUE(slots.take_refusal());
}

}  // namespace
}  // namespace gradgate::http
