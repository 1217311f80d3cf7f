// A worker whose tensor moved (DDP reallocates its buckets) declares it again with its new buffer:
// the tensor keeps its key, the next all-reduce reads and writes the new buffer, and the old one
// is unmapped instead of piling up for as long as the worker stays.
#include <fcntl.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "ingress_fixture.h"
#include "raw_connection.h"

namespace gradgate::gateway::testing {
namespace {

// A memfd of `count` floats, each `value`, sealed as the C client seals its buffers, and its
// mapping here.
struct FloatMemfd {
  FloatMemfd(size_t elements, float value)
      : fd(memfd_create("redeclare", MFD_CLOEXEC | MFD_ALLOW_SEALING)), count(elements) {
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(count * sizeof(float))), 0);
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    data = static_cast<float*>(
        mmap(nullptr, count * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    for (size_t i = 0; i < count; ++i) data[i] = value;
  }
  ~FloatMemfd() {
    munmap(data, count * sizeof(float));
    close(fd);
  }
  std::vector<float> values() const { return {data, data + count}; }
  int fd;
  size_t count;
  float* data = nullptr;
};

// The key of the DECLARE_OK that answers a declaration of `elements` fp32 values in `buffer`.
uint32_t declare(RawConnection& raw, uint64_t request, uint64_t elements,
                 const FloatMemfd& buffer) {
  EXPECT_TRUE(raw.send(proto::encode(request, declare_of(elements)), buffer.fd));
  const auto reply = raw.receive();
  EXPECT_TRUE(reply.has_value());
  if (!reply) return 0;
  const auto ok = proto::decode_body<proto::DeclareOk>(*reply);
  EXPECT_TRUE(ok.has_value());
  return ok ? ok->key : 0;
}

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
