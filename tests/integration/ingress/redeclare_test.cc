// A worker whose tensor moved (DDP reallocates its buckets) declares it again with its new buffer:
// the tensor keeps its key, the next all-reduce reads and writes the new buffer, and the old one
// is unmapped instead of piling up for as long as the worker stays.
#include <vector>

#include "ingress_fixture.h"
#include "raw_connection.h"

namespace gradgate::gateway::testing {
namespace {

TEST_F(IngressTest, ATensorDeclaredAgainMovesToItsNewBuffer) {
  constexpr size_t kElements = 1024;
  RawConnection raw(socket_path_);
  ASSERT_TRUE(raw.connected());
  raw.hello(0);
  FloatMemfd before(kElements, 1.0f), after(kElements, 2.0f);
  const uint32_t key = declare(raw, 2, kElements, before);
  EXPECT_EQ(declare(raw, 3, kElements, after), key);
  EXPECT_EQ(server_->stats().mapped_bytes, kElements * sizeof(float));

  ASSERT_TRUE(raw.send(proto::encode(4, proto::Allreduce{key})));
  const auto reply = raw.receive();
  ASSERT_TRUE(reply.has_value());
  const auto done = proto::decode_body<proto::AllreduceDone>(*reply);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->status, GG_OK) << done->message;
  EXPECT_EQ(after.values(), std::vector<float>(kElements, 4.0f));
  EXPECT_EQ(before.values(), std::vector<float>(kElements, 1.0f));
}

}  // namespace
}  // namespace gradgate::gateway::testing
