#include "codec_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>

#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"
#include "gradient_data.h"
#include "kernels/encode_traffic.h"

namespace gradgate::bench {
namespace {

using kernels::Codec;
using kernels::CodecParams;
using Clock = std::chrono::steady_clock;

// Median seconds of `fn` over at least 3 runs and at least `min_seconds` in all (at most 50 runs);
// `setup` runs untimed before each run.
template <typename Setup, typename Fn>
double median_seconds(double min_seconds, Setup&& setup, Fn&& fn) {
  std::vector<double> runs;
  double total = 0.0;
  while (runs.size() < 3 || (total < min_seconds && runs.size() < 50)) {
    setup();
    const auto start = Clock::now();
    fn();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    runs.push_back(s);
    total += s;
  }
  std::nth_element(runs.begin(), runs.begin() + static_cast<ptrdiff_t>(runs.size() / 2),
                   runs.end());
  return runs[runs.size() / 2];
}

template <typename Fn>
double median_seconds(double min_seconds, Fn&& fn) {
  return median_seconds(
      min_seconds, [] {}, std::forward<Fn>(fn));
}

double gbps(size_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

std::optional<Dist> parse_dist(const std::string& name) {
  for (Dist d : {Dist::kGaussian, Dist::kLaplace, Dist::kStudentT3, Dist::kReal}) {
    if (dist_name(d) == name) return d;
  }
  return std::nullopt;
}

// One worker's full step: agreed scale, every round (absorbing its own frame), returns the size of
// the last frame.
size_t encode_step(const Codec& codec, const kernels::StepContext& base,
                   std::span<const float> grad, kernels::Stream& stream,
                   std::vector<std::byte>& frame) {
  kernels::StepContext ctx = base;
  if (codec.needs_agreed_scale()) ctx.agreed_scale = codec.local_scale(grad, stream);
  size_t size = 0;
  for (int round = 0; round < codec.rounds(); ++round) {
    size = codec.encode(round, ctx, grad, stream, frame).value();
    if (codec.rounds() > 1) {
      const auto view = kernels::parse_frame({frame.data(), size}).value();
      (void)codec.absorb(round, view, stream);
    }
  }
  return size;
}

struct Row {
  std::string codec, param, dist;
  size_t n = 0;
  double encode_gbps = 0, decode_gbps = 0, memcpy_gbps = 0, traffic_bytes = 0, roofline = 0;
  double update_gbps = 0, update_roofline = 0;
  double wire_ratio = 0;
  std::optional<double> k_ratio, nth_element_gbps, sort_gbps;
};

void print_row(const Row& r, bool json, std::ostream& out) {
  if (json) {
    nlohmann::json j = {{"codec", r.codec},
                        {"param", r.param},
                        {"dist", r.dist},
                        {"n", r.n},
                        {"encode_gbps", r.encode_gbps},
                        {"decode_gbps", r.decode_gbps},
                        {"memcpy_gbps", r.memcpy_gbps},
                        {"update_gbps", r.update_gbps},
                        {"update_roofline", r.update_roofline},
                        {"traffic_bytes", r.traffic_bytes},
                        {"roofline", r.roofline},
                        {"wire_ratio", r.wire_ratio}};
    if (r.k_ratio) j["k_ratio"] = *r.k_ratio;
    if (r.nth_element_gbps) j["nth_element_gbps"] = *r.nth_element_gbps;
    if (r.sort_gbps) j["sort_gbps"] = *r.sort_gbps;
    out << j.dump() << std::endl;
    return;
  }
  const auto opt = [](const std::optional<double>& v, int precision) {
    std::ostringstream s;
    if (v)
      s << std::fixed << std::setprecision(precision) << *v;
    else
      s << "-";
    return s.str();
  };
  out << std::left << std::setw(9) << r.codec << std::setw(44) << r.param << std::setw(11) << r.dist
      << std::right << std::setw(10) << r.n << std::fixed << std::setprecision(2) << std::setw(9)
      << r.encode_gbps << std::setw(9) << r.decode_gbps << std::setw(9) << r.memcpy_gbps
      << std::setw(8) << std::setprecision(3) << r.roofline << std::setw(8) << r.update_roofline
      << std::setw(10) << std::setprecision(4) << r.wire_ratio << std::setw(8) << opt(r.k_ratio, 3)
      << std::setw(9) << opt(r.nth_element_gbps, 3) << std::setw(9) << opt(r.sort_gbps, 3)
      << std::endl;
}

void print_header(std::ostream& out) {
  out << std::left << std::setw(9) << "codec" << std::setw(44) << "param" << std::setw(11) << "dist"
      << std::right << std::setw(10) << "n" << std::setw(9) << "enc GB/s" << std::setw(9)
      << "dec GB/s" << std::setw(9) << "memcpy" << std::setw(8) << "roofln" << std::setw(8)
      << "upd-rf" << std::setw(10) << "wire" << std::setw(8) << "k/k*" << std::setw(9) << "nth GB/s"
      << std::setw(9) << "sort" << std::endl;
}

// Speed of std::nth_element (and, up to 2^24 elements, std::sort) picking the k largest |v|.
void measure_selection_references(const std::vector<float>& v, size_t k, double min_seconds,
                                  Row& row) {
  std::vector<float> magnitudes(v.size()), scratch(v.size());
  std::transform(v.begin(), v.end(), magnitudes.begin(), [](float x) { return std::fabs(x); });
  const auto reset = [&] {
    std::memcpy(scratch.data(), magnitudes.data(), v.size() * sizeof(float));
  };
  const double nth = median_seconds(min_seconds, reset, [&] {
    std::nth_element(scratch.begin(), scratch.begin() + static_cast<ptrdiff_t>(k - 1),
                     scratch.end(), std::greater<>());
  });
  row.nth_element_gbps = gbps(v.size() * sizeof(float), nth);
  if (v.size() <= (size_t{1} << 24)) {  // sorting 2^26 elements 3 times takes ~20 s
    const double sorted = median_seconds(
        0.0, reset, [&] { std::sort(scratch.begin(), scratch.end(), std::greater<>()); });
    row.sort_gbps = gbps(v.size() * sizeof(float), sorted);
  }
}

}  // namespace

CodecBenchOptions default_codec_bench_options() {
  CodecBenchOptions o;
  o.specs = {"none",
             "fp16",
             "bf16",
             "qsgd:bits=4,workers=8",
             "qsgd:bits=8,workers=64",
             "sign",
             "topk:density=0.01",
             "topk:density=0.001",
             "topk:density=0.01,select=exact",
             "randomk:density=0.01",
             "powersgd:rank=4"};
  o.sizes = {size_t{1} << 16, size_t{1} << 20, size_t{1} << 24, size_t{1} << 26};
  o.dists = {"gaussian", "laplace", "student_t3", "real"};
  return o;
}

namespace {

using CodecList = std::vector<std::pair<CodecParams, std::unique_ptr<Codec>>>;

// What the options name: the codecs, the data kinds and, for "real", the gradients; false after
// saying on `err` what could not be read.
bool read_inputs(const CodecBenchOptions& options, CodecList& codecs, std::vector<Dist>& dists,
                 std::optional<std::vector<float>>& real, std::ostream& err) {
  for (const auto& spec : options.specs) {
    auto params = kernels::parse_codec_spec(spec);
    if (!params.ok()) {
      err << params.status().message() << "\n";
      return false;
    }
    codecs.emplace_back(*params, std::move(kernels::make_cpu_codec(*params).value()));
  }
  for (const auto& name : options.dists) {
    auto d = parse_dist(name);
    if (!d) {
      err << "unknown data kind '" << name << "' (expected gaussian, laplace, student_t3, real)\n";
      return false;
    }
    dists.push_back(*d);
  }
  if (std::find(dists.begin(), dists.end(), Dist::kReal) != dists.end()) {
    real = load_real_gradients(options.real_gradients_path);
    if (!real) {
      err << "cannot read real gradients from '" << options.real_gradients_path << "'\n";
      return false;
    }
  }
  return true;
}

// One row: the codec's encode and decode of `grad` after its warm-up steps, beside the
// references that `measure_references` takes right before.
template <typename References>
Row measure_row(const CodecBenchOptions& options, const CodecParams& params, const Codec& codec,
                const std::vector<float>& grad, Dist dist, References&& measure_references) {
  const size_t n = grad.size();
  kernels::TensorDesc desc;
  desc.elements = n;
  auto stream = std::move(codec.make_stream(desc).value());
  std::vector<std::byte> frame(codec.max_frame_bytes(desc));
  kernels::StepContext ctx;
  size_t frame_bytes = 0;
  for (int s = 0; s < options.warmup_steps; ++s) {
    ctx.step = static_cast<uint64_t>(s);
    frame_bytes = encode_step(codec, ctx, grad, *stream, frame);
  }
  Row row;
  measure_references(row);
  const double encode_s = median_seconds(options.min_seconds, [&] {
    ++ctx.step;
    frame_bytes = encode_step(codec, ctx, grad, *stream, frame);
  });
  const auto view = kernels::parse_frame({frame.data(), frame_bytes}).value();
  std::vector<float> acc(n, 0.0f);
  const double decode_s = median_seconds(
      options.min_seconds, [&] { (void)codec.decode_accumulate(view, stream.get(), acc); });

  const std::string spec = kernels::format_codec_spec(params);
  const auto colon = spec.find(':');
  row.codec = std::string(codec_name(params.id));
  row.param = colon == std::string::npos ? "" : spec.substr(colon + 1);
  row.dist = dist_name(dist);
  row.n = n;
  row.encode_gbps = gbps(n * sizeof(float), encode_s);
  row.decode_gbps = gbps(n * sizeof(float), decode_s);
  row.traffic_bytes = least_encode_traffic(params, n, frame_bytes);
  row.roofline = row.encode_gbps * row.traffic_bytes / (row.memcpy_gbps * 8.0);
  row.update_roofline = row.encode_gbps / 4.0 * row.traffic_bytes / row.update_gbps;
  row.wire_ratio = static_cast<double>(frame_bytes) / static_cast<double>(n * sizeof(float));
  if (params.id == CodecId::kTopk) {
    uint32_t count;
    std::memcpy(&count, view.payload.data(), sizeof count);
    const double k = std::max(1.0, std::round(params.density * static_cast<double>(n)));
    row.k_ratio = count / k;
    measure_selection_references(grad, static_cast<size_t>(k), options.min_seconds, row);
  }
  return row;
}

}  // namespace

bool run_codec_bench(const CodecBenchOptions& options, std::ostream& out, std::ostream& err) {
  CodecList codecs;
  std::vector<Dist> dists;
  std::optional<std::vector<float>> real;
  if (!read_inputs(options, codecs, dists, real, err)) return false;
  if (!options.json) print_header(out);

  for (size_t n : options.sizes) {
    if (n == 0 || n > kernels::kMaxFrameElements) {
      err << "size " << n << " is out of range [1, 2^32)\n";
      return false;
    }
    std::vector<float> copy_src(n, 1.0f), copy_dst(n);
    // The references, measured right before each row so that a machine whose speed drifts
    // (turbo, neighbours) compares like with like. The second one is the in-place update
    // e += g (12 bytes of traffic per element), the access pattern of an encode with error
    // feedback: where memcpy is slow (non-temporal stores, virtual machines) it is the tighter
    // roofline.
    const auto measure_references = [&](Row& row) {
      row.memcpy_gbps = gbps(n * sizeof(float), median_seconds(options.min_seconds, [&] {
                               std::memcpy(copy_dst.data(), copy_src.data(), n * sizeof(float));
                             }));
      row.update_gbps = gbps(n * 12, median_seconds(options.min_seconds, [&] {
                               float* e = copy_dst.data();
                               const float* g = copy_src.data();
                               for (size_t i = 0; i < n; ++i) e[i] += g[i];
                             }));
    };
    for (Dist dist : dists) {
      const std::vector<float> grad =
          dist == Dist::kReal ? tile(*real, n, 7) : make_gradient(dist, n, 42 + n);
      for (const auto& [params, codec] : codecs) {
        print_row(measure_row(options, params, *codec, grad, dist, measure_references),
                  options.json, out);
      }
    }
  }
  return true;
}

}  // namespace gradgate::bench
