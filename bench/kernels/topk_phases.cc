#include "topk_phases.h"

#include <limits>

#include "gpu_timer.h"
#include "gradgate/kernels/cuda/device_stream.h"
#include "scratch.h"
#include "topk_launch.h"
#include "topk_selection.h"

namespace gradgate::bench {

using kernels::cuda::DeviceStream;
using kernels::cuda::Scratch;
using kernels::cuda::TopkDeviceState;

Result<TopkPhaseTimes> time_topk_phases(const kernels::CodecParams& params, const float* grad,
                                        size_t n, kernels::Stream& stream, cudaStream_t cuda,
                                        int warmup, int reps) {
  auto* device_stream = dynamic_cast<DeviceStream*>(&stream);
  auto* state =
      device_stream ? dynamic_cast<TopkDeviceState*>(device_stream->codec_state()) : nullptr;
  if (state == nullptr || !state->warm.warm()) {
    return Status(ErrorCode::kInvalidArgument, "not a warm CUDA topk stream");
  }
  auto scratch = Scratch::current();
  if (!scratch.ok()) return scratch.status();
  float* e = device_stream->device_residual();
  const auto pass_at = [&](float t) {
    return [&, t]() -> Status {
      GRADGATE_RETURN_IF_ERROR((*scratch)->begin(cuda));
      GRADGATE_RETURN_IF_ERROR(
          kernels::cuda::launch_topk_collect(grad, e, n, t, false, state->candidates, state->listed,
                                             params.first_pass, (*scratch)->device_tally(), cuda));
      return (*scratch)->finish(cuda).status();
    };
  };
  TopkPhaseTimes times;
  auto pass = median_ms(cuda, warmup, reps, pass_at(std::numeric_limits<float>::infinity()));
  if (!pass.ok()) return pass.status();
  times.pass_ms = *pass;
  auto collect = median_ms(cuda, warmup, reps, pass_at(state->warm.candidate_threshold()));
  if (!collect.ok()) return collect.status();
  times.collect_ms = *collect;

  const auto input = kernels::cuda::selection_input(params, grad, e, n);
  auto selection = median_ms(cuda, warmup, reps, [&]() -> Status {
    return kernels::cuda::select_topk_on_device(input, *state, **scratch, cuda).status();
  });
  if (!selection.ok()) return selection.status();
  times.selection_ms = *selection;
  return times;
}

}  // namespace gradgate::bench
