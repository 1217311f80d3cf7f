// Bad arguments to every function of the C API: GG_INVALID_ARGUMENT with a message, no crash.
#include <cstdint>
#include <string>

#include "c_caller.h"
#include "gradgate/base/codec_table.h"
#include "ingress_fixture.h"

namespace gradgate::gateway::testing {
namespace {

#define EXPECT_INVALID(call, fragment)                                                            \
  do {                                                                                            \
    EXPECT_EQ((call), GG_INVALID_ARGUMENT);                                                       \
    EXPECT_NE(std::string(gg_last_error()).find(fragment), std::string::npos) << gg_last_error(); \
  } while (0)

TEST_F(IngressTest, BadArgumentsAreInvalidArgumentWithAMessage) {
  gg_client* client = nullptr;
  EXPECT_INVALID(gg_connect(nullptr, 0, &client), "null or empty socket path");
  EXPECT_INVALID(gg_connect("", 0, &client), "null or empty socket path");
  EXPECT_INVALID(gg_connect(socket_path_.c_str(), 0, nullptr), "null output pointer");
  EXPECT_INVALID(gg_connect(std::string(200, 'x').c_str(), 0, &client), "longer than");
  EXPECT_INVALID(gg_job(nullptr, nullptr), "gg_job: null client");
  EXPECT_INVALID(gg_collective_timeout(nullptr, nullptr), "gg_collective_timeout: null client");
  EXPECT_INVALID(gg_close(nullptr), "gg_close: null client");

  client = connect(0);
  ASSERT_NE(client, nullptr);
  EXPECT_INVALID(gg_job(client, nullptr), "gg_job: null output pointer");
  EXPECT_INVALID(gg_collective_timeout(client, nullptr),
                 "gg_collective_timeout: null output pointer");
  gg_tensor* tensor = nullptr;
  EXPECT_INVALID(gg_declare(nullptr, "t", 4, GG_FP32, 0, 0, 0, &tensor), "null client");
  EXPECT_INVALID(gg_declare(client, nullptr, 4, GG_FP32, 0, 0, 0, &tensor), "null name");
  EXPECT_INVALID(gg_declare(client, "t", 4, GG_FP32, 0, 0, 0, nullptr), "null output pointer");
  EXPECT_INVALID(gg_declare(client, "", 4, GG_FP32, 0, 0, 0, &tensor), "empty tensor name");
  EXPECT_INVALID(gg_declare(client, std::string(256, 'n').c_str(), 4, GG_FP32, 0, 0, 0, &tensor),
                 "longer than 255");
  EXPECT_INVALID(gg_declare(client, "t", 0, GG_FP32, 0, 0, 0, &tensor), "0 elements");
  EXPECT_INVALID(c_declare_with_dtype(client, "t", 3, &tensor), "unknown dtype 3");
  EXPECT_INVALID(c_declare_with_dtype(client, "t", -1, &tensor), "unknown dtype -1");
  EXPECT_INVALID(gg_declare(client, "t", 6, GG_FP32, 2, 2, 0, &tensor), "does not hold 6");
  EXPECT_INVALID(gg_declare(client, "t", 6, GG_FP32, 6, 0, 0, &tensor), "one zero dimension");
  EXPECT_INVALID(gg_declare(client, "t", uint64_t{1} << 62, GG_FP32, 0, 0, 0, &tensor),
                 "larger than");
  EXPECT_INVALID(gg_declare(client, "t", 4, GG_FP32, 0, 0, -1.0, &tensor), "data volume");
  EXPECT_EQ(tensor, nullptr);
  EXPECT_NE(std::string(gg_last_error()).find("gg_declare(\"t\")"), std::string::npos);

  EXPECT_EQ(gg_tensor_data(nullptr), nullptr);
  EXPECT_EQ(gg_tensor_bytes(nullptr), 0u);
  gg_request* request = nullptr;
  EXPECT_INVALID(gg_allreduce(nullptr, &request), "null tensor");
  ASSERT_EQ(gg_declare(client, "t", 4, GG_FP32, 2, 2, 0, &tensor), GG_OK);
  EXPECT_INVALID(gg_allreduce(tensor, nullptr), "null output pointer");
  EXPECT_INVALID(gg_wait(nullptr, 0, nullptr), "null request");
  gg_codec codec = GG_CODEC_NONE;
  EXPECT_INVALID(gg_tensor_codec(nullptr, &codec), "gg_tensor_codec: null tensor");
  EXPECT_INVALID(gg_tensor_codec(tensor, nullptr), "gg_tensor_codec: null output pointer");
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
  EXPECT_EQ(handler_.declared.size(), 1u);
  ASSERT_EQ(gg_close(client), GG_OK);
}

TEST_F(IngressTest, BadArgumentsToDeclareCudaAreInvalidArgumentWithAMessage) {
  gg_client* client = connect(0);
  ASSERT_NE(client, nullptr);
  gg_cuda_buffer buffer{};
  gg_tensor* tensor = nullptr;
  EXPECT_INVALID(gg_declare_cuda(client, "t", 4, GG_FP32, 0, 0, 0, nullptr, &tensor),
                 "null buffer");
  EXPECT_INVALID(gg_declare_cuda(nullptr, "t", 4, GG_FP32, 0, 0, 0, &buffer, &tensor),
                 "null client");
  EXPECT_INVALID(gg_declare_cuda(client, nullptr, 4, GG_FP32, 0, 0, 0, &buffer, &tensor),
                 "null name");
  EXPECT_INVALID(gg_declare_cuda(client, "t", 4, GG_FP32, 0, 0, 0, &buffer, nullptr),
                 "null output pointer");
  EXPECT_INVALID(gg_declare_cuda(client, "t", 0, GG_FP32, 0, 0, 0, &buffer, &tensor), "0 elements");
  EXPECT_INVALID(c_declare_cuda_with_dtype(client, "t", 3, &buffer, &tensor), "unknown dtype 3");
  EXPECT_INVALID(c_declare_cuda_with_dtype(client, "t", 1000, &buffer, &tensor),
                 "unknown dtype 1000");
  EXPECT_INVALID(gg_declare_cuda(client, "t", 6, GG_FP32, 2, 2, 0, &buffer, &tensor),
                 "does not hold 6");
  buffer.offset = UINT64_MAX - 8;
  EXPECT_INVALID(gg_declare_cuda(client, "t", 4, GG_FP32, 0, 0, 0, &buffer, &tensor), "overflows");
  EXPECT_EQ(tensor, nullptr);
  EXPECT_NE(std::string(gg_last_error()).find("gg_declare_cuda(\"t\")"), std::string::npos);

  // A name declared with a shared buffer stays one.
  buffer.offset = 0;
  ASSERT_EQ(gg_declare(client, "h", 4, GG_FP32, 0, 0, 0, &tensor), GG_OK);
  EXPECT_INVALID(gg_declare_cuda(client, "h", 4, GG_FP32, 0, 0, 0, &buffer, &tensor),
                 "already declared with a shared buffer");
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
  EXPECT_EQ(handler_.declared.size(), 1u);
  ASSERT_EQ(gg_close(client), GG_OK);
}

TEST(StatusNames, AreStable) {
  EXPECT_STREQ(gg_status_name(GG_OK), "ok");
  EXPECT_STREQ(gg_status_name(GG_TIMEOUT), "timeout");
  EXPECT_STREQ(gg_status_name(GG_PEER_FAILED), "peer_failed");
  EXPECT_STREQ(gg_status_name(GG_CLOSED), "closed");
  EXPECT_STREQ(c_status_name(42), "unknown");
  EXPECT_STREQ(c_status_name(-1), "unknown");
}

TEST(CodecNames, AreTheTablesNames) {
  EXPECT_STREQ(gg_codec_name(GG_CODEC_NONE), "none");
  EXPECT_STREQ(gg_codec_name(GG_CODEC_TOPK), "topk");
  EXPECT_STREQ(gg_codec_name(GG_CODEC_POWERSGD), "powersgd");
  for (const CodecTraits& row : kCodecs) {
    EXPECT_EQ(gg_codec_name(static_cast<gg_codec>(row.id)), row.name);
  }
  EXPECT_STREQ(gg_codec_name(GG_CODEC_UNKNOWN), "unknown");
  EXPECT_STREQ(gg_codec_name(static_cast<gg_codec>(42)), "unknown");
}

}  // namespace
}  // namespace gradgate::gateway::testing
