// A worker process with its tensors in GPU memory (gradgate_cuda_test_worker): the gateway opens
// its allocation once for both tensors (and for a tensor that moves within it), reads what the
// worker wrote after its ready event, and closes the mapping when the worker is killed. Built only
// with CUDA; skips without a GPU.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gradgate/kernels/cuda_ipc.h"
#include "ingress_fixture.h"
#include "worker_process.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::seconds;

/// The first float of a buffer in GPU memory, read after the worker's ready event.
float first_value(const WorkerBuffer& buffer) {
  float value = 0.0f;
  EXPECT_EQ(cudaSetDevice(buffer.cuda_device), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(static_cast<cudaEvent_t>(buffer.ready_event)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(&value, buffer.data, sizeof value, cudaMemcpyDeviceToHost), cudaSuccess);
  return value;
}

TEST_F(IngressTest, KilledCudaWorkerLeavesNoMappingOpen) {
  if (const Status available = kernels::cuda_ipc_available(); !available.ok()) {
    GTEST_SKIP() << "CUDA IPC is not available here: " << available.to_string();
  }
  constexpr uint64_t kElements = 4096;
  // The worker program as built, or where GRADGATE_CUDA_TEST_WORKER says (a bundle on a GPU
  // machine, tools/gpu/bundle.sh).
  const char* program = std::getenv("GRADGATE_CUDA_TEST_WORKER");
  WorkerProcess worker(
      {"--socket", socket_path_, "--local-rank", "1", "--elements", std::to_string(kElements)},
      program != nullptr ? program : GRADGATE_CUDA_TEST_WORKER);
  ASSERT_TRUE(worker.wait_for_line("declared", seconds(60)))
      << "the worker exited with " << worker.wait_exit(seconds(10));
  EXPECT_EQ(server_->stats().cuda_mappings, 1u);  // two tensors and a move, one allocation
  EXPECT_EQ(server_->stats().mapped_bytes, 0u);
  EXPECT_EQ(server_->stats().protocol_errors, 0u);

  // Declared: "cuda.a", "cuda.b", "cuda.a" moved one float on, "cuda.a" moved back.
  std::vector<WorkerBuffer> buffers;
  ASSERT_TRUE(handler_.wait_until([&] { return handler_.declared.size() == 4; }));
  buffers = handler_.declared_buffers;
  ASSERT_EQ(buffers.size(), 4u);
  EXPECT_EQ(handler_.declared[2].name, "cuda.a");
  EXPECT_EQ(buffers[2].data, buffers[0].data + sizeof(float));
  EXPECT_EQ(buffers[3].data, buffers[0].data);
  for (const WorkerBuffer& buffer : buffers) {
    EXPECT_EQ(buffer.memory, kernels::MemoryKind::kDevice);
    EXPECT_GE(buffer.cuda_device, 0);
    EXPECT_NE(buffer.ready_event, nullptr);
    EXPECT_EQ(buffer.bytes, kElements * sizeof(float));
  }
  EXPECT_EQ(buffers[1].data, buffers[0].data + kElements * sizeof(float));
  // Through the declarations in use: a move released the earlier one's event.
  EXPECT_EQ(first_value(buffers[3]), 1.5f);
  EXPECT_EQ(first_value(buffers[1]), 2.5f);

  worker.kill_now();
  EXPECT_EQ(worker.wait_exit(seconds(30)), 128 + 9);
  EXPECT_TRUE(handler_.wait_until([&] { return handler_.left.size() == 1; }));
  EXPECT_TRUE(poll_until([&] { return server_->stats().cuda_mappings == 0; }))
      << server_->stats().cuda_mappings << " CUDA mappings still open";
}

}  // namespace
}  // namespace gradgate::gateway::testing
