// The gateway's GPU data path, in process: 2 gateways x 2 local workers whose buffers are GPU
// memory (as the ingress hands them over from CUDA IPC), over TCP on loopback. For every codec the
// four workers get the same bits, and the same bits as the same job on host buffers where the
// CUDA codec's frames are the CPU's (within the codec's bound where they are not). Skips without
// a usable GPU (and in builds without CUDA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gateway/core/gateway.h"
#include "gateway/startup/component_options.h"
#include "gateway/transport/tcp_transport.h"
#include "gradgate/kernels/device_ops.h"
#include "gradgate/kernels/half.h"
#include "outcome.h"
#include "transport_test_support.h"  // loopback_options

namespace gradgate::gateway {
namespace {

constexpr uint32_t kGateways = 2;
constexpr uint32_t kWorkers = 2;
constexpr size_t kElements = 256 * 257;  // odd-sized, and a 256 x 257 matrix for powersgd
constexpr int kSteps = 3;
// Cuts the tensor's parts into segments (3 per ring part, 5 under all-gather), on both paths alike.
constexpr uint64_t kSegmentBytes = 64 << 10;

struct Case {
  std::string codec;
  Dtype dtype = Dtype::kFp32;
  /// 0: bit-identical to the host path. Otherwise the largest relative L2 distance allowed (the
  /// CUDA codec's frames may differ: threshold top-k's selection, powersgd's summation order).
  double tolerance = 0.0;
  size_t rows = 0, cols = 0;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.codec + "_" + std::to_string(static_cast<int>(info.param.dtype));
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

using testing::Outcome;

size_t element_bytes(Dtype dtype) { return dtype == Dtype::kFp32 ? 4 : 2; }

// Worker `worker`'s gradient at `step`, in `dtype`'s bytes.
std::vector<std::byte> gradient(uint32_t worker, int step, Dtype dtype) {
  std::vector<std::byte> bytes(kElements * element_bytes(dtype));
  uint64_t state = 0x9E3779B97F4A7C15ull * (worker + 1) + static_cast<uint64_t>(step);
  for (size_t i = 0; i < kElements; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float value = static_cast<float>(static_cast<int32_t>(state >> 40) - (1 << 23)) / 8e6f;
    if (dtype == Dtype::kFp32) {
      std::memcpy(bytes.data() + 4 * i, &value, 4);
    } else {
      const uint16_t bits =
          dtype == Dtype::kFp16 ? kernels::float_to_fp16(value) : kernels::float_to_bf16(value);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    }
  }
  return bytes;
}

// The job: its gateways and every worker's buffer, on the GPU or in host memory, the codec placed
// as `placement` says (by default on the GPU whenever it can).
class Job {
 public:
  Job(const Case& param, bool on_gpu, PlacementMode placement = PlacementMode::kGpu)
      : param_(param), on_gpu_(on_gpu) {
    std::vector<uint16_t> ports;
    for (uint32_t rank = 0; rank < kGateways; ++rank) {
      GatewayConfig config;
      config.node_rank = rank;
      config.nodes.assign(kGateways, {"127.0.0.1", 0});
      config.local_workers = kWorkers;
      config.codec = param.codec;
      config.min_compress_elements = 0;
      config.timeout = std::chrono::milliseconds(30000);
      config.job_id = 7;
      config.segment_bytes = kSegmentBytes;
      config.placement = placement;
      transports_.push_back(
          std::make_unique<TcpTransport>(testing::loopback_options(rank, kGateways, ports)));
      gateways_.push_back(std::make_unique<Gateway>(core_options(config), *transports_.back()));
      if (!gateways_.back()->start().ok()) throw std::runtime_error("gateway start");
      ports.push_back(transports_.back()->listen_port());
    }
    const size_t bytes = kElements * element_bytes(param.dtype);
    const TensorSpec spec{"w", kElements, param.dtype, param.rows, param.cols, 0.0};
    for (uint32_t rank = 0; rank < kGateways; ++rank) {
      for (uint32_t local = 0; local < kWorkers; ++local) {
        if (!gateways_[rank]->on_worker_joined(local).ok()) throw std::runtime_error("join");
        WorkerBuffer buffer;
        buffer.bytes = bytes;
        if (on_gpu_) {
          memory_.push_back(std::move(kernels::DeviceMemory::allocate(0, bytes)).value());
          buffer.data = memory_.back()->data();
          buffer.memory = kernels::MemoryKind::kDevice;
          buffer.cuda_device = 0;
        } else {
          host_.emplace_back(bytes);
          buffer.data = host_.back().data();
        }
        auto key = gateways_[rank]->on_declare(local, spec, buffer);
        if (!key.ok()) throw std::runtime_error(key.status().to_string());
        key_ = *key;
        buffers_.push_back(buffer);
      }
    }
  }
  ~Job() {
    for (auto& gateway : gateways_) gateway->stop();
  }

  Gateway& gateway(uint32_t rank) { return *gateways_[rank]; }

  /// One step: every worker's gradient in, the all-reduce, every worker's result out (as fp32).
  std::vector<std::vector<float>> step(int step) {
    auto queue = on_gpu_ ? std::move(kernels::DeviceQueue::create(0)).value() : nullptr;
    for (uint32_t worker = 0; worker < buffers_.size(); ++worker) {
      const auto bytes = gradient(worker, step, param_.dtype);
      if (queue) {
        EXPECT_TRUE(queue->copy_to_device(buffers_[worker].data, bytes.data(), bytes.size()).ok());
      } else {
        std::memcpy(buffers_[worker].data, bytes.data(), bytes.size());
      }
    }
    if (queue) {
      EXPECT_TRUE(queue->synchronize().ok());
    }
    std::vector<Outcome> outcomes(buffers_.size());
    for (uint32_t worker = 0; worker < buffers_.size(); ++worker) {
      gateways_[worker / kWorkers]->on_allreduce(worker % kWorkers, key_,
                                                 outcomes[worker].callback());
    }
    std::vector<std::vector<float>> results;
    for (uint32_t worker = 0; worker < buffers_.size(); ++worker) {
      const auto outcome = outcomes[worker].wait(std::chrono::seconds(60));
      EXPECT_TRUE(outcome.has_value() && outcome->status.ok())
          << (outcome ? outcome->status.to_string() : "no outcome");
      std::vector<std::byte> bytes(buffers_[worker].bytes);
      if (queue) {
        EXPECT_TRUE(queue->copy_to_host(bytes.data(), buffers_[worker].data, bytes.size()).ok());
        EXPECT_TRUE(queue->synchronize().ok());
      } else {
        std::memcpy(bytes.data(), buffers_[worker].data, bytes.size());
      }
      results.push_back(as_fp32(bytes));
    }
    return results;
  }

 private:
  std::vector<float> as_fp32(const std::vector<std::byte>& bytes) const {
    std::vector<float> values(kElements);
    for (size_t i = 0; i < kElements; ++i) {
      if (param_.dtype == Dtype::kFp32) {
        std::memcpy(&values[i], bytes.data() + 4 * i, 4);
        continue;
      }
      uint16_t bits;
      std::memcpy(&bits, bytes.data() + 2 * i, 2);
      values[i] = param_.dtype == Dtype::kFp16 ? kernels::fp16_to_float(bits)
                                               : kernels::bf16_to_float(bits);
    }
    return values;
  }

  Case param_;
  bool on_gpu_;
  std::vector<std::unique_ptr<TcpTransport>> transports_;
  std::vector<std::unique_ptr<Gateway>> gateways_;
  std::vector<std::unique_ptr<kernels::DeviceMemory>> memory_;
  std::vector<std::vector<std::byte>> host_;
  std::vector<WorkerBuffer> buffers_;
  uint32_t key_ = 0;
};

double relative_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double difference = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(difference / std::max(norm, 1e-30));
}

class GpuPathTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuPathTest, WorkersAgreeAndMatchTheHostPath) {
  if (auto gpu = kernels::DeviceQueue::create(0); !gpu.ok()) {
    GTEST_SKIP() << "no usable GPU: " << gpu.status().to_string();
  }
  const Case& param = GetParam();
  Job gpu(param, true);
  Job host(param, false);
  for (uint32_t rank = 0; rank < kGateways; ++rank) {  // not a fallback to the CPU's bits
    ASSERT_EQ(gpu.gateway(rank).stats().gpu_tensors_on_gpu, 1u) << "gateway " << rank;
  }
  for (int step = 0; step < kSteps; ++step) {
    const auto on_gpu = gpu.step(step);
    const auto on_host = host.step(step);
    for (size_t worker = 1; worker < on_gpu.size(); ++worker) {
      ASSERT_EQ(std::memcmp(on_gpu[worker].data(), on_gpu[0].data(), kElements * 4), 0)
          << "worker " << worker << " differs from worker 0 at step " << step;
    }
    if (param.tolerance == 0.0) {
      EXPECT_EQ(std::memcmp(on_gpu[0].data(), on_host[0].data(), kElements * 4), 0)
          << "step " << step << ": the GPU path differs from the host path";
    } else {
      EXPECT_LE(relative_distance(on_gpu[0], on_host[0]), param.tolerance) << "step " << step;
    }
  }
}

// compression.placement cpu: the node sum is made on the GPU and the codec runs on the CPU, the
// result the host path's bits; auto: a probe measured both sides and the tensor went to one.
TEST(GpuPlacementTest, CpuAndAutoPlacementsKeepTheHostPathsResults) {
  if (auto gpu = kernels::DeviceQueue::create(0); !gpu.ok()) {
    GTEST_SKIP() << "no usable GPU: " << gpu.status().to_string();
  }
  const Case param{"fp16"};
  Job host(param, false);
  Job staged(param, true, PlacementMode::kCpu);
  Job measured(param, true, PlacementMode::kAuto);
  for (uint32_t rank = 0; rank < kGateways; ++rank) {
    EXPECT_EQ(staged.gateway(rank).stats().gpu_tensors_on_cpu, 1u);
    EXPECT_EQ(staged.gateway(rank).stats().gpu_tensors_on_gpu, 0u);
    EXPECT_TRUE(staged.gateway(rank).placement_probes().empty());
    const GatewayStats stats = measured.gateway(rank).stats();
    EXPECT_EQ(stats.gpu_tensors_on_cpu + stats.gpu_tensors_on_gpu, 1u);
    const auto probes = measured.gateway(rank).placement_probes();
    ASSERT_EQ(probes.size(), 1u);
    EXPECT_EQ(probes[0].sample_elements, kElements);
    EXPECT_GT(probes[0].probe.gpu_elements_per_second, 0.0);
    EXPECT_GT(probes[0].probe.cpu_elements_per_second, 0.0);
    EXPECT_EQ(stats.gpu_tensors_on_gpu == 1,
              probes[0].probe.gpu_elements_per_second >= probes[0].probe.cpu_elements_per_second);
  }
  for (int step = 0; step < kSteps; ++step) {
    const auto on_host = host.step(step);
    for (Job* job : {&staged, &measured}) {
      const auto result = job->step(step);
      EXPECT_EQ(std::memcmp(result[0].data(), on_host[0].data(), kElements * 4), 0)
          << "step " << step << ": differs from the host path";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, GpuPathTest,
                         ::testing::Values(Case{"none"}, Case{"none", Dtype::kFp16},
                                           Case{"none", Dtype::kBf16}, Case{"fp16"}, Case{"bf16"},
                                           Case{"qsgd:bits=8,workers=8"}, Case{"sign"},
                                           Case{"topk:density=0.01,select=exact"},
                                           Case{"randomk:density=0.05"},
                                           Case{"topk:density=0.01", Dtype::kFp32, 0.5},
                                           Case{"powersgd:rank=4", Dtype::kFp32, 1e-3, 256, 257}),
                         case_name);

}  // namespace
}  // namespace gradgate::gateway
