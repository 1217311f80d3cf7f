#include "gpu_timer.h"

#include <algorithm>
#include <vector>

#include "cuda_check.h"

namespace gradgate::bench {
namespace {

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

}  // namespace

Result<double> median_ms(cudaStream_t stream, int warmup, int reps,
                         const std::function<Status()>& op) {
  if (reps < 1) return Status(ErrorCode::kInvalidArgument, "no timed runs");
  for (int i = 0; i < warmup; ++i) GRADGATE_RETURN_IF_ERROR(op());
  Events events;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&events.start));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&events.stop));
  std::vector<float> runs;
  for (int i = 0; i < reps; ++i) {
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.start, stream));
    GRADGATE_RETURN_IF_ERROR(op());
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.stop, stream));
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events.stop));
    float ms = 0.0f;
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events.start, events.stop));
    runs.push_back(ms);
  }
  std::nth_element(runs.begin(), runs.begin() + static_cast<long>(runs.size() / 2), runs.end());
  return static_cast<double>(runs[runs.size() / 2]);
}

}  // namespace gradgate::bench
