// gradgate_test_worker: a training process reduced to its use of the C API, for tests. For each
// step it fills every tensor with test_value(...), all-reduces all of them, waits, and appends
// the results (as fp32, in tensor order) to the output file. With --seconds it keeps stepping
// until that much time has passed, and --step-log records each step's wall time (for tests that
// watch the time per all-reduce change). With --digest the output file gets one line per result
// instead ("STEP NAME FNV1A64-HEX" of its bytes as delivered), for runs too large to keep whole
// that still must compare bit for bit. Exit code 0 on success, 10 + the gg_status of the first
// failed call otherwise (with its name and message on stderr).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "gradgate/client.h"
#include "gradgate/kernels/half.h"
#include "test_values.h"

namespace {

struct TensorArg {
  std::string name;
  uint64_t elements = 0;
  gg_dtype dtype = GG_FP32;
  uint64_t rows = 0, cols = 0;
};

/// NAME:ELEMENTS[:DTYPE[:ROWS:COLS]], DTYPE one of fp32, fp16, bf16.
bool parse_tensor(const std::string& text, TensorArg& out) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1) {
    parts.push_back(text.substr(start, colon - start));
  }
  parts.push_back(text.substr(start));
  if (parts.size() != 2 && parts.size() != 3 && parts.size() != 5) return false;
  try {
    out.name = parts[0];
    out.elements = std::stoull(parts[1]);
    if (parts.size() >= 3) {
      if (parts[2] == "fp32") {
        out.dtype = GG_FP32;
      } else if (parts[2] == "fp16") {
        out.dtype = GG_FP16;
      } else if (parts[2] == "bf16") {
        out.dtype = GG_BF16;
      } else {
        return false;
      }
    }
    if (parts.size() == 5) {
      out.rows = std::stoull(parts[3]);
      out.cols = std::stoull(parts[4]);
    }
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

[[noreturn]] void die(gg_status status, const char* call) {
  std::fprintf(stderr, "gradgate_test_worker: %s: %s: %s\n", call, gg_status_name(status),
               gg_last_error());
  std::exit(10 + static_cast<int>(status));
}

void check(gg_status status, const char* call) {
  if (status != GG_OK) die(status, call);
}

void fill(gg_tensor* tensor, gg_dtype dtype, uint64_t seed, uint32_t index, uint64_t step,
          uint32_t worker) {
  const size_t elements = gg_tensor_bytes(tensor) / (dtype == GG_FP32 ? 4 : 2);
  void* data = gg_tensor_data(tensor);
  for (size_t i = 0; i < elements; ++i) {
    const float v = gradgate::test::test_value(seed, index, step, worker, i);
    if (dtype == GG_FP32) {
      static_cast<float*>(data)[i] = v;
    } else if (dtype == GG_FP16) {
      static_cast<uint16_t*>(data)[i] = gradgate::kernels::float_to_fp16(v);
    } else {
      static_cast<uint16_t*>(data)[i] = gradgate::kernels::float_to_bf16(v);
    }
  }
}

void append_as_fp32(std::ofstream& out, gg_tensor* tensor, gg_dtype dtype) {
  const size_t elements = gg_tensor_bytes(tensor) / (dtype == GG_FP32 ? 4 : 2);
  const void* data = gg_tensor_data(tensor);
  std::vector<float> values(elements);
  for (size_t i = 0; i < elements; ++i) {
    if (dtype == GG_FP32) {
      values[i] = static_cast<const float*>(data)[i];
    } else if (dtype == GG_FP16) {
      values[i] = gradgate::kernels::fp16_to_float(static_cast<const uint16_t*>(data)[i]);
    } else {
      values[i] = gradgate::kernels::bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    }
  }
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
}

/// FNV-1a over the tensor's bytes as delivered: equal digests for bit-identical results.
uint64_t fnv1a64(gg_tensor* tensor) {
  const auto* bytes = static_cast<const unsigned char*>(gg_tensor_data(tensor));
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < gg_tensor_bytes(tensor); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

std::vector<gg_tensor*> declare_all(gg_client* client, const std::vector<TensorArg>& specs) {
  std::vector<gg_tensor*> tensors(specs.size());
  for (size_t t = 0; t < specs.size(); ++t) {
    const TensorArg& s = specs[t];
    check(gg_declare(client, s.name.c_str(), s.elements, s.dtype, s.rows, s.cols, 1.0, &tensors[t]),
          "gg_declare");
  }
  return tensors;
}

/// Waits for each tensor's all-reduce of `step` and appends its result to `out` when it is open:
/// a digest line, or its values as fp32.
void wait_and_record(const std::vector<gg_request*>& requests,
                     const std::vector<gg_tensor*>& tensors, const std::vector<TensorArg>& specs,
                     int64_t timeout_ms, uint64_t step, bool digest, std::ofstream& out) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    check(gg_wait(requests[t], timeout_ms, nullptr), "gg_wait");
    if (out.is_open() && digest) {
      out << step << " " << specs[t].name << " " << std::hex << fnv1a64(tensors[t]) << std::dec
          << "\n";
    } else if (out.is_open()) {
      append_as_fp32(out, tensors[t], specs[t].dtype);
    }
  }
}

/// Appends 'unix_time step seconds_of_the_step' for a step that began at `step_start`.
void log_step(std::ofstream& step_log, uint64_t step,
              std::chrono::steady_clock::time_point step_start) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const double seconds_of_step =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  step_log << std::fixed << std::setprecision(6) << std::chrono::duration<double>(now).count()
           << " " << step << " " << seconds_of_step << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Test worker: all-reduces deterministic tensors through a gradgate gateway"};
  std::string socket_path, out_path;
  uint32_t local_rank = 0;
  std::vector<std::string> tensor_args;
  uint64_t steps = 1, seed = 0;
  int64_t timeout_ms = -1;
  double seconds = 0.0;
  int64_t delay_ms = 0;
  std::string step_log_path;
  bool hang = false, digest = false;
  app.add_option("--socket", socket_path, "the gateway's ingress socket")->required();
  app.add_option("--local-rank", local_rank, "this worker's rank on its node")->required();
  app.add_option("--tensor", tensor_args, "NAME:ELEMENTS[:DTYPE[:ROWS:COLS]]")->required();
  app.add_option("--steps", steps, "all-reduces per tensor");
  app.add_option("--seed", seed, "seed of the test values");
  app.add_option("--out", out_path, "file the results are appended to (\"\": none)")->required();
  app.add_option("--seconds", seconds, "keep stepping until this much time passed (0: --steps)");
  app.add_option("--step-log", step_log_path,
                 "appends 'unix_time step seconds_of_the_step' per step");
  app.add_option("--timeout-ms", timeout_ms, "gg_wait timeout (negative: none)");
  app.add_option("--delay-ms", delay_ms,
                 "waits this long before each step's all-reduces (a "
                 "straggler: the compute of a slower GPU)");
  app.add_flag("--digest", digest, "write a digest line per result instead of its values");
  app.add_flag("--hang-after-allreduce", hang, "start the first step, print 'started', block");
  CLI11_PARSE(app, argc, argv);

  std::vector<TensorArg> specs(tensor_args.size());
  for (size_t t = 0; t < specs.size(); ++t) {
    if (!parse_tensor(tensor_args[t], specs[t])) {
      std::fprintf(stderr, "gradgate_test_worker: bad --tensor \"%s\"\n", tensor_args[t].c_str());
      return 2;
    }
  }
  std::ofstream out;
  if (!out_path.empty()) out.open(out_path, std::ios::binary | std::ios::app);
  std::ofstream step_log;
  if (!step_log_path.empty()) step_log.open(step_log_path, std::ios::app);
  for (const auto& [path, stream] : {std::pair{&out_path, &out}, {&step_log_path, &step_log}}) {
    if (!path->empty() && !*stream) {
      std::fprintf(stderr, "gradgate_test_worker: cannot open \"%s\"\n", path->c_str());
      return 2;
    }
  }

  gg_client* client = nullptr;
  check(gg_connect(socket_path.c_str(), local_rank, &client), "gg_connect");
  gg_job_info job{};
  check(gg_job(client, &job), "gg_job");
  const uint32_t worker = job.node_rank * job.local_workers + local_rank;
  const std::vector<gg_tensor*> tensors = declare_all(client, specs);
  const auto begin = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  for (uint64_t step = 0; seconds > 0 ? elapsed() < seconds : step < steps; ++step) {
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    const auto step_start = std::chrono::steady_clock::now();
    std::vector<gg_request*> requests(tensors.size());
    for (size_t t = 0; t < tensors.size(); ++t) {
      fill(tensors[t], specs[t].dtype, seed, static_cast<uint32_t>(t), step, worker);
      check(gg_allreduce(tensors[t], &requests[t]), "gg_allreduce");
    }
    if (hang) {
      std::printf("started\n");
      std::fflush(stdout);
      for (;;) pause();  // until killed
    }
    wait_and_record(requests, tensors, specs, timeout_ms, step, digest, out);
    if (step_log.is_open()) log_step(step_log, step, step_start);
  }
  out.flush();
  check(gg_close(client), "gg_close");
  return !out_path.empty() && !out ? 3 : 0;
}
