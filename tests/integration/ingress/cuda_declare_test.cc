// DECLARE_CUDA where the gateway cannot map the worker's memory (here: no GPU, or a GPU UUID that
// no visible GPU has): the worker gets GG_REJECTED with the reason, the session goes on, and the
// same tensor declared with a shared buffer all-reduces as usual.
#include <string>

#include "gradgate/kernels/cuda_ipc.h"
#include "ingress_fixture.h"

namespace gradgate::gateway::testing {
namespace {

TEST_F(IngressTest, DeclareCudaThatCannotBeMappedIsRejectedAndTheSessionGoesOn) {
  gg_client* client = connect(0);
  ASSERT_NE(client, nullptr);
  gg_cuda_buffer nowhere{};  // all-zero UUID and handles: on no GPU anywhere
  gg_tensor* tensor = nullptr;
  ASSERT_EQ(gg_declare_cuda(client, "dev", 64, GG_FP32, 0, 0, 0.0, &nowhere, &tensor), GG_REJECTED);
  EXPECT_EQ(tensor, nullptr);
  const std::string message = gg_last_error();
  EXPECT_EQ(message.rfind("gg_declare_cuda(\"dev\"): gateway answered rejected: ", 0), 0u)
      << message;
  const Status available = kernels::cuda_ipc_available();
  const std::string why = available.ok()
                              ? "is GPU-00000000-0000-0000-0000-000000000000"
                              : "this gateway cannot map CUDA memory: " + available.message();
  EXPECT_NE(message.find(why), std::string::npos) << message;
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
  EXPECT_EQ(server_->stats().cuda_mappings, 0u);
  EXPECT_EQ(server_->stats().declarations_refused, 1u);
  EXPECT_TRUE(handler_.declared.empty());

  // The worker falls back to a shared buffer under the same name.
  ASSERT_EQ(gg_declare(client, "dev", 64, GG_FP32, 0, 0, 0.0, &tensor), GG_OK) << gg_last_error();
  auto* values = static_cast<float*>(gg_tensor_data(tensor));
  for (int i = 0; i < 64; ++i) values[i] = 0.5f * static_cast<float>(i);
  gg_request* request = nullptr;
  ASSERT_EQ(gg_allreduce(tensor, &request), GG_OK) << gg_last_error();
  ASSERT_EQ(gg_wait(request, 10000, nullptr), GG_OK) << gg_last_error();
  for (int i = 0; i < 64; ++i) ASSERT_EQ(values[i], static_cast<float>(i)) << i;
  EXPECT_EQ(server_->stats().mapped_bytes, 256u);
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
  ASSERT_EQ(gg_close(client), GG_OK);
  EXPECT_TRUE(poll_until([&] { return server_->stats().mapped_bytes == 0; }));
}

}  // namespace
}  // namespace gradgate::gateway::testing
