// Declaring tensors and all-reducing them through shared memory, with a handler that doubles.
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gradgate/kernels/half.h"
#include "ingress_fixture.h"

namespace gradgate::gateway::testing {
namespace {

/// The bits a worker writes for element i, and what doubling them gives, per dtype.
std::vector<std::byte> pattern(gg_dtype dtype, size_t elements, float scale) {
  std::vector<std::byte> bytes(elements * (dtype == GG_FP32 ? 4 : 2));
  for (size_t i = 0; i < elements; ++i) {
    const float v = scale * (static_cast<float>(i % 97) - 48.0f) / 8.0f;
    if (dtype == GG_FP32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = dtype == GG_FP16 ? kernels::float_to_fp16(v) : kernels::float_to_bf16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

class RoundTripTest : public IngressTest, public ::testing::WithParamInterface<gg_dtype> {};

TEST_P(RoundTripTest, HandlerSeesTheClientsBytesAndTheClientSeesTheHandlersWrites) {
  const gg_dtype dtype = GetParam();
  constexpr size_t kElements = 1000;
  gg_client* client = connect(0);
  ASSERT_NE(client, nullptr);
  gg_tensor* tensor = nullptr;
  ASSERT_EQ(gg_declare(client, "bucket0", kElements, dtype, 10, 100, 32.0, &tensor), GG_OK)
      << gg_last_error();
  ASSERT_EQ(gg_tensor_bytes(tensor), kElements * (dtype == GG_FP32 ? 4 : 2));
  gg_codec codec = GG_CODEC_NONE;
  ASSERT_EQ(gg_tensor_codec(tensor, &codec), GG_OK);
  EXPECT_EQ(codec, GG_CODEC_UNKNOWN) << "no all-reduce yet";
  ASSERT_TRUE(handler_.wait_until([&] { return handler_.declared.size() == 1; }));
  EXPECT_EQ(handler_.declared[0].name, "bucket0");
  EXPECT_EQ(handler_.declared[0].rows, 10u);
  EXPECT_EQ(handler_.declared[0].cols, 100u);
  EXPECT_EQ(handler_.declared[0].data_volume, 32.0);
  EXPECT_EQ(static_cast<int>(handler_.declared[0].dtype), static_cast<int>(dtype));
  EXPECT_EQ(server_->stats().mapped_bytes, gg_tensor_bytes(tensor));

  for (uint64_t step = 0; step < 3; ++step) {
    const auto input = pattern(dtype, kElements, 1.0f + static_cast<float>(step));
    std::memcpy(gg_tensor_data(tensor), input.data(), input.size());
    gg_request* request = nullptr;
    ASSERT_EQ(gg_allreduce(tensor, &request), GG_OK) << gg_last_error();
    gg_allreduce_info info{};
    ASSERT_EQ(gg_wait(request, 10000, &info), GG_OK) << gg_last_error();
    EXPECT_EQ(info.step, step);
    EXPECT_EQ(info.raw_bytes, kElements * 4);
    EXPECT_EQ(info.wire_bytes, kElements);
    EXPECT_EQ(info.encode_seconds, 0.25);
    EXPECT_EQ(info.communicate_seconds, 0.5);
    EXPECT_EQ(info.decode_seconds, 0.125);
    ASSERT_EQ(gg_tensor_codec(tensor, &codec), GG_OK);
    EXPECT_EQ(codec, static_cast<gg_codec>(step)) << "the codec the handler named for the step";
    ASSERT_TRUE(handler_.wait_until([&] { return handler_.last_input.size() == 1; }));
    EXPECT_EQ(handler_.last_input.begin()->second, input);
    const auto doubled = pattern(dtype, kElements, 2.0f * (1.0f + static_cast<float>(step)));
    EXPECT_EQ(std::memcmp(gg_tensor_data(tensor), doubled.data(), doubled.size()), 0);
  }
  ASSERT_EQ(gg_close(client), GG_OK);
  EXPECT_TRUE(poll_until([&] { return server_->stats().mapped_bytes == 0; }));
}

std::string dtype_name(const ::testing::TestParamInfo<gg_dtype>& dtype) {
  return dtype.param == GG_FP32 ? "fp32" : dtype.param == GG_FP16 ? "fp16" : "bf16";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RoundTripTest, ::testing::Values(GG_FP32, GG_FP16, GG_BF16),
                         dtype_name);

TEST_F(IngressTest, RedeclaringANameSharesItsBuffer) {
  gg_client* client = connect(0);
  ASSERT_NE(client, nullptr);
  gg_tensor* first = nullptr;
  gg_tensor* again = nullptr;
  gg_tensor* other = nullptr;
  ASSERT_EQ(gg_declare(client, "layer", 64, GG_FP32, 0, 0, 0.0, &first), GG_OK);
  // The same handle, however often: a handle lives until gg_close, so a fresh one per call (a
  // wrapper that declares every step) would pile up.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(gg_declare(client, "layer", 64, GG_FP32, 0, 0, 0.0, &again), GG_OK);
    ASSERT_EQ(again, first);
  }
  EXPECT_EQ(gg_declare(client, "layer", 65, GG_FP32, 0, 0, 0.0, &other), GG_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gg_last_error()).find("already declared with 64"), std::string::npos)
      << gg_last_error();
  EXPECT_EQ(gg_declare(client, "layer", 64, GG_FP16, 0, 0, 0.0, &other), GG_INVALID_ARGUMENT);
  EXPECT_EQ(other, nullptr);
  ASSERT_EQ(gg_close(client), GG_OK);
  EXPECT_EQ(handler_.declared.size(), 1u);
}

TEST_F(IngressTest, ThreadsOfOneClientAllReduceConcurrently) {
  constexpr int kThreads = 8;
  constexpr int kSteps = 25;
  constexpr size_t kElements = 257;
  gg_client* client = connect(3);
  ASSERT_NE(client, nullptr);
  std::vector<std::future<std::string>> results;
  for (int t = 0; t < kThreads; ++t) {
    results.push_back(std::async(std::launch::async, [client, t]() -> std::string {
      gg_tensor* tensor = nullptr;
      const std::string name = "thread" + std::to_string(t);
      if (gg_declare(client, name.c_str(), kElements, GG_FP32, 0, 0, 0.0, &tensor) != GG_OK) {
        return gg_last_error();
      }
      auto* data = static_cast<float*>(gg_tensor_data(tensor));
      for (int step = 0; step < kSteps; ++step) {
        for (size_t i = 0; i < kElements; ++i) data[i] = static_cast<float>(t * 1000 + step + i);
        gg_request* request = nullptr;
        if (gg_allreduce(tensor, &request) != GG_OK) return gg_last_error();
        gg_allreduce_info info{};
        if (gg_wait(request, 10000, &info) != GG_OK) return gg_last_error();
        if (info.step != static_cast<uint64_t>(step)) return name + ": wrong step";
        for (size_t i = 0; i < kElements; ++i) {
          if (data[i] != 2.0f * static_cast<float>(t * 1000 + step + i)) {
            return name + ": wrong sum at " + std::to_string(i);
          }
        }
      }
      return "";
    }));
  }
  for (auto& result : results) {
    ASSERT_EQ(result.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    EXPECT_EQ(result.get(), "");
  }
  ASSERT_EQ(gg_close(client), GG_OK);
}

TEST_F(IngressTest, WaitTimesOutAndALaterWaitSucceeds) {
  gg_client* client = connect(0);
  ASSERT_NE(client, nullptr);
  gg_tensor* tensor = nullptr;
  ASSERT_EQ(gg_declare(client, "hold-me", 16, GG_FP32, 0, 0, 0.0, &tensor), GG_OK);
  auto* data = static_cast<float*>(gg_tensor_data(tensor));
  for (int i = 0; i < 16; ++i) data[i] = static_cast<float>(i);
  gg_request* request = nullptr;
  ASSERT_EQ(gg_allreduce(tensor, &request), GG_OK);
  EXPECT_EQ(gg_wait(request, 20, nullptr), GG_TIMEOUT);
  EXPECT_NE(std::string(gg_last_error()).find("hold-me"), std::string::npos) << gg_last_error();
  EXPECT_EQ(gg_wait(request, 0, nullptr), GG_TIMEOUT);
  gg_request* second = nullptr;
  EXPECT_EQ(gg_allreduce(tensor, &second), GG_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gg_last_error()).find("in flight"), std::string::npos);

  ASSERT_TRUE(handler_.wait_until([&] { return handler_.held_count() == 1; }));
  handler_.release_held();
  ASSERT_EQ(gg_wait(request, 10000, nullptr), GG_OK) << gg_last_error();
  EXPECT_EQ(data[5], 10.0f);
  ASSERT_EQ(gg_close(client), GG_OK);
}

TEST_F(IngressTest, AFailedStepLeavesTheCodecOfTheLastSuccessfulOne) {
  gg_client* client = connect(0);
  ASSERT_NE(client, nullptr);
  gg_tensor* tensor = nullptr;
  ASSERT_EQ(gg_declare(client, "flaky", 16, GG_FP32, 0, 0, 0.0, &tensor), GG_OK);
  // Steps 0 and 2 succeed (codec ids 0 and 2), step 1 fails (naming kTopk).
  for (const auto& [step, status, codec] :
       {std::tuple{0, GG_OK, GG_CODEC_NONE}, std::tuple{1, GG_PEER_FAILED, GG_CODEC_NONE},
        std::tuple{2, GG_OK, GG_CODEC_BF16}}) {
    gg_request* request = nullptr;
    ASSERT_EQ(gg_allreduce(tensor, &request), GG_OK) << gg_last_error();
    EXPECT_EQ(gg_wait(request, 10000, nullptr), status) << "step " << step;
    gg_codec now = GG_CODEC_UNKNOWN;
    ASSERT_EQ(gg_tensor_codec(tensor, &now), GG_OK);
    EXPECT_EQ(now, codec) << "step " << step;
  }
  ASSERT_EQ(gg_close(client), GG_OK);
}

TEST_F(IngressTest, ErrorsCarryTheirCodeAndMessageToTheClient) {
  auto [client, tensor, request] = start_allreduce("fail-net", 16);
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(gg_wait(request, 10000, nullptr), GG_PEER_FAILED);
  const std::string message = gg_last_error();
  EXPECT_NE(message.find("gg_wait(\"fail-net\")"), std::string::npos) << message;
  EXPECT_NE(message.find("node 3 did not answer within 5 s"), std::string::npos) << message;

  gg_tensor* refused = nullptr;
  EXPECT_EQ(gg_declare(client, "reject-me", 16, GG_FP32, 0, 0, 0.0, &refused),
            GG_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(gg_last_error()).find("gg_declare(\"reject-me\")"), std::string::npos);
  EXPECT_NE(std::string(gg_last_error()).find("memory cap"), std::string::npos);
  EXPECT_EQ(refused, nullptr);
  EXPECT_EQ(server_->stats().mapped_bytes, 16u * 4);  // the refused buffer was unmapped
  EXPECT_EQ(server_->stats().declarations_refused, 1u);

  // The session survives both errors.
  ASSERT_EQ(gg_allreduce(tensor, &request), GG_OK);
  EXPECT_EQ(gg_wait(request, 10000, nullptr), GG_PEER_FAILED);
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
  ASSERT_EQ(gg_close(client), GG_OK);
}

}  // namespace
}  // namespace gradgate::gateway::testing
