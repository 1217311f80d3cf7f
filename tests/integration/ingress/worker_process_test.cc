// Real worker processes through the whole C API: results on disk match the recomputed inputs.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gradgate/kernels/half.h"
#include "ingress_fixture.h"
#include "test_values.h"
#include "worker_process.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::seconds;

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

/// What the worker of global rank `worker` should read back: its own input, rounded to the
/// dtype, doubled by the handler.
float expected(gg_dtype dtype, uint64_t seed, uint32_t tensor, uint64_t step, uint32_t worker,
               uint64_t i) {
  const float v = gradgate::test::test_value(seed, tensor, step, worker, i);
  if (dtype == GG_FP16) return 2.0f * kernels::fp16_to_float(kernels::float_to_fp16(v));
  if (dtype == GG_BF16) return 2.0f * kernels::bf16_to_float(kernels::float_to_bf16(v));
  return 2.0f * v;
}

TEST_F(IngressTest, WorkerProcessesAllReduceEveryDtype) {
  constexpr uint64_t kSteps = 3, kSeed = 42;
  const std::vector<std::pair<gg_dtype, uint64_t>> tensors = {
      {GG_FP32, 600}, {GG_FP16, 300}, {GG_BF16, 150}};
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    workers.push_back(std::make_unique<WorkerProcess>(std::vector<std::string>{
        "--socket", socket_path_, "--local-rank", std::to_string(rank), "--tensor", "w:600",
        "--tensor", "h:300:fp16", "--tensor", "b:150:bf16:10:15", "--steps", std::to_string(kSteps),
        "--seed", std::to_string(kSeed), "--out",
        dir_.path() + "/out" + std::to_string(rank) + ".bin", "--timeout-ms", "20000"}));
  }
  for (auto& worker : workers) EXPECT_EQ(worker->wait_exit(seconds(60)), 0);

  for (uint32_t rank = 0; rank < 2; ++rank) {
    const auto got = read_floats(dir_.path() + "/out" + std::to_string(rank) + ".bin");
    ASSERT_EQ(got.size(), kSteps * (600 + 300 + 150));
    const uint32_t global =
        DoublingHandler::kJob.node_rank * DoublingHandler::kJob.local_workers + rank;
    size_t at = 0;
    for (uint64_t step = 0; step < kSteps; ++step) {
      for (uint32_t t = 0; t < tensors.size(); ++t) {
        for (uint64_t i = 0; i < tensors[t].second; ++i, ++at) {
          ASSERT_EQ(got[at], expected(tensors[t].first, kSeed, t, step, global, i))
              << "rank " << rank << " step " << step << " tensor " << t << " element " << i;
        }
      }
    }
  }
}

TEST_F(IngressTest, WorkerExitsWithTheStatusOfTheFailedCall) {
  WorkerProcess refused({"--socket", socket_path_, "--local-rank", "9", "--tensor", "w:8", "--out",
                         dir_.path() + "/refused.bin"});
  EXPECT_EQ(refused.wait_exit(seconds(30)), 10 + GG_REJECTED);
  WorkerProcess failing({"--socket", socket_path_, "--local-rank", "0", "--tensor", "fail:8",
                         "--out", dir_.path() + "/failing.bin"});
  EXPECT_EQ(failing.wait_exit(seconds(30)), 10 + GG_PEER_FAILED);
  WorkerProcess nowhere({"--socket", dir_.path() + "/none.sock", "--local-rank", "0", "--tensor",
                         "w:8", "--out", dir_.path() + "/nowhere.bin"});
  EXPECT_EQ(nowhere.wait_exit(seconds(30)), 10 + GG_CONNECT_FAILED);
}

}  // namespace
}  // namespace gradgate::gateway::testing
