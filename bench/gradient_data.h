// Synthetic gradient data for codec tests and benchmarks: reproducible draws from the distributions
// gradients resemble (Gaussian, Laplace, heavy-tailed Student-t with 3 degrees of freedom).
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace gradgate::bench {

/// kReal: gradients of a small CNN on Fashion-MNIST (bench/data, made by
/// tools/capture_gradients.py), tiled to the requested size.
enum class Dist { kGaussian, kLaplace, kStudentT3, kReal };

inline std::string dist_name(Dist d) {
  switch (d) {
    case Dist::kGaussian:
      return "gaussian";
    case Dist::kLaplace:
      return "laplace";
    case Dist::kStudentT3:
      return "student_t3";
    case Dist::kReal:
      return "real";
  }
  return "unknown";
}

/// The captured real gradients (raw little-endian fp32), or nullopt if the file is unreadable.
inline std::optional<std::vector<float>> load_real_gradients(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const auto bytes = static_cast<size_t>(in.tellg());
  std::vector<float> values(bytes / sizeof(float));
  in.seekg(0);
  if (values.empty() || !in.read(reinterpret_cast<char*>(values.data()),
                                 static_cast<std::streamsize>(values.size() * sizeof(float)))) {
    return std::nullopt;
  }
  return values;
}

/// `source` repeated to n values, each copy rotated by a seeded offset so tiles do not align.
inline std::vector<float> tile(const std::vector<float>& source, size_t n, uint64_t seed) {
  std::vector<float> out(n);
  std::mt19937_64 rng(seed);
  for (size_t start = 0; start < n; start += source.size()) {
    const size_t offset = rng() % source.size();
    for (size_t i = 0; i < source.size() && start + i < n; ++i) {
      out[start + i] = source[(offset + i) % source.size()];
    }
  }
  return out;
}

/// n values from `dist` (not kReal: use tile(load_real_gradients(...))) with scale ~`scale`,
/// reproducible for a given seed.
inline std::vector<float> make_gradient(Dist dist, size_t n, uint64_t seed, float scale = 1e-3f) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(n);
  std::normal_distribution<float> normal(0.0f, scale);
  std::exponential_distribution<float> exponential(1.0f / scale);
  std::student_t_distribution<float> student(3.0f);
  for (auto& v : out) {
    switch (dist) {
      case Dist::kGaussian:
        v = normal(rng);
        break;
      case Dist::kLaplace:
        v = (rng() & 1) ? exponential(rng) : -exponential(rng);
        break;
      case Dist::kStudentT3:
        v = scale * student(rng);
        break;
      case Dist::kReal:
        break;
    }
  }
  return out;
}

}  // namespace gradgate::bench
