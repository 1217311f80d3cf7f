// gradgate_cuda_test_worker: a training process whose gradients stay in GPU memory, reduced to
// declaring them. It allocates one device buffer holding two tensors of --elements fp32 values
// ("cuda.a" filled with 1.5, "cuda.b" with 2.5 after it), an interprocess event per tensor that
// it records once the values are written, and declares both with gg_declare_cuda. On the way it
// checks that declaring "cuda.a" again with the same buffer gives a handle, that declaring it at
// another offset moves it there and declaring it at its own offset moves it back (both GG_OK), and
// that a tensor past the allocation's end is GG_REJECTED. Then it prints
// "declared" and waits to be killed. Exit code 10 + the gg_status of an unexpected result, 2 for a
// CUDA failure (with the call on stderr).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <CLI/CLI.hpp>

#include "gradgate/client.h"

namespace {

void check_cuda(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "gradgate_cuda_test_worker: %s: %s\n", call, cudaGetErrorString(error));
  std::exit(2);
}

void expect(gg_status got, gg_status wanted, const char* call) {
  if (got == wanted) return;
  std::fprintf(stderr, "gradgate_cuda_test_worker: %s: %s (expected %s): %s\n", call,
               gg_status_name(got), gg_status_name(wanted), gg_last_error());
  std::exit(10 + static_cast<int>(got == GG_OK ? GG_INTERNAL : got));
}

/// Writes `value` into `elements` floats at `device_pointer`.
void fill(float* device_pointer, uint64_t elements, float value) {
  const std::vector<float> values(elements, value);
  check_cuda(
      cudaMemcpy(device_pointer, values.data(), elements * sizeof(float), cudaMemcpyHostToDevice),
      "cudaMemcpy");
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path;
  uint32_t local_rank = 0;
  uint64_t elements = 4096;
  CLI::App app{"CUDA test worker: declares GPU tensors to a gradgate gateway and waits"};
  app.add_option("--socket", socket_path, "the gateway's ingress socket")->required();
  app.add_option("--local-rank", local_rank, "this worker's rank on its node")->required();
  app.add_option("--elements", elements, "fp32 values per tensor");
  CLI11_PARSE(app, argc, argv);

  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  const size_t tensor_bytes = elements * sizeof(float);
  void* base = nullptr;
  check_cuda(cudaMalloc(&base, 2 * tensor_bytes), "cudaMalloc");
  cudaIpcMemHandle_t memory_handle;
  check_cuda(cudaIpcGetMemHandle(&memory_handle, base), "cudaIpcGetMemHandle");

  gg_client* client = nullptr;
  expect(gg_connect(socket_path.c_str(), local_rank, &client), GG_OK, "gg_connect");
  const char* names[2] = {"cuda.a", "cuda.b"};
  gg_cuda_buffer buffers[2];
  for (int t = 0; t < 2; ++t) {
    float* values = static_cast<float*>(base) + t * elements;
    fill(values, elements, t == 0 ? 1.5f : 2.5f);
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming),
               "cudaEventCreateWithFlags");
    check_cuda(cudaEventRecord(event, nullptr), "cudaEventRecord");
    cudaIpcEventHandle_t event_handle;
    check_cuda(cudaIpcGetEventHandle(&event_handle, event), "cudaIpcGetEventHandle");
    gg_cuda_buffer& buffer = buffers[t];
    std::memcpy(buffer.device_uuid, &properties.uuid, sizeof buffer.device_uuid);
    std::memcpy(buffer.memory_handle, &memory_handle, sizeof buffer.memory_handle);
    buffer.offset = t * tensor_bytes;
    std::memcpy(buffer.ready_event_handle, &event_handle, sizeof buffer.ready_event_handle);
    gg_tensor* tensor = nullptr;
    expect(gg_declare_cuda(client, names[t], elements, GG_FP32, 0, 0, 0.0, &buffer, &tensor), GG_OK,
           "gg_declare_cuda");
    if (gg_tensor_data(tensor) != nullptr || gg_tensor_bytes(tensor) != tensor_bytes) {
      std::fprintf(stderr, "gradgate_cuda_test_worker: wrong gg_tensor_data or gg_tensor_bytes\n");
      return 10 + GG_INTERNAL;
    }
  }

  gg_tensor* again = nullptr;
  expect(gg_declare_cuda(client, names[0], elements, GG_FP32, 0, 0, 0.0, &buffers[0], &again),
         GG_OK, "gg_declare_cuda again");
  gg_cuda_buffer moved = buffers[0];
  moved.offset += sizeof(float);
  expect(gg_declare_cuda(client, names[0], elements, GG_FP32, 0, 0, 0.0, &moved, &again), GG_OK,
         "gg_declare_cuda with another offset");
  expect(gg_declare_cuda(client, names[0], elements, GG_FP32, 0, 0, 0.0, &buffers[0], &again),
         GG_OK, "gg_declare_cuda back at its own offset");
  gg_cuda_buffer past_end = buffers[1];
  past_end.offset = uint64_t{1} << 40;
  expect(gg_declare_cuda(client, "cuda.past_end", elements, GG_FP32, 0, 0, 0.0, &past_end, &again),
         GG_REJECTED, "gg_declare_cuda past the allocation's end");
  if (std::strstr(gg_last_error(), "do not fit") == nullptr) {
    std::fprintf(stderr, "gradgate_cuda_test_worker: unexpected message: %s\n", gg_last_error());
    return 10 + GG_REJECTED;
  }

  std::printf("declared\n");
  std::fflush(stdout);
  for (;;) pause();
}
