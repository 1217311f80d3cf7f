#include "control/policy/dagc.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace gradgate::control {
namespace {

Status check_inputs(std::span<const double> weights, double mean_keep, KeepBounds bounds) {
  if (weights.empty()) return Status(ErrorCode::kInvalidArgument, "dagc: no weights");
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(std::isfinite(weights[i]) && weights[i] > 0.0)) {
      return Status(ErrorCode::kInvalidArgument,
                    "dagc: weights[" + std::to_string(i) + "] must be positive and finite");
    }
  }
  if (!(bounds.lo > 0.0 && bounds.lo <= mean_keep && mean_keep <= bounds.hi && bounds.hi <= 1.0)) {
    return Status(
        ErrorCode::kInvalidArgument,
        "dagc: needs 0 < lo <= mean_keep <= hi <= 1, got lo=" + std::to_string(bounds.lo) +
            " mean_keep=" + std::to_string(mean_keep) + " hi=" + std::to_string(bounds.hi));
  }
  return {};
}

// sum_i clamp(c w_i, lo, hi) is continuous, non-decreasing and linear between the clipping points
// lo/w_i and hi/w_i: find the segment that reaches the total and solve on it.
std::vector<double> exact(std::span<const double> w, double total, KeepBounds b) {
  std::vector<double> points;
  points.reserve(2 * w.size());
  for (const double wi : w) {
    points.push_back(b.lo / wi);
    points.push_back(b.hi / wi);
  }
  std::sort(points.begin(), points.end());
  const auto sum_at = [&](double c) {
    double sum = 0.0;
    for (const double wi : w) sum += std::clamp(c * wi, b.lo, b.hi);
    return sum;
  };
  // The first clipping point where the sum reaches the total; the one before it falls short.
  const auto right = std::partition_point(points.begin() + 1, points.end(),
                                          [&](double c) { return sum_at(c) < total; });
  double c = points.back();
  if (right != points.end()) {
    const double left_c = *(right - 1);
    const double left_sum = sum_at(left_c);
    const double right_sum = sum_at(*right);
    c = right_sum == left_sum
            ? *right
            : left_c + (total - left_sum) / (right_sum - left_sum) * (*right - left_c);
  }
  std::vector<double> keep;
  keep.reserve(w.size());
  for (const double wi : w) keep.push_back(std::clamp(c * wi, b.lo, b.hi));
  return keep;
}

std::vector<double> approximate(std::span<const double> w, double total, KeepBounds b) {
  const double weight_sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<double> keep;
  keep.reserve(w.size());
  for (const double wi : w) keep.push_back(std::clamp(total * wi / weight_sum, b.lo, b.hi));
  const double missing = total - std::accumulate(keep.begin(), keep.end(), 0.0);
  const auto room = [&](double k) { return missing > 0.0 ? b.hi - k : k - b.lo; };
  double room_sum = 0.0;
  for (const double k : keep) room_sum += room(k);
  if (room_sum <= 0.0) return keep;
  const double share = missing / room_sum;
  for (double& k : keep) k = std::clamp(k + share * room(k), b.lo, b.hi);
  return keep;
}

}  // namespace

Result<std::vector<double>> allocate_keep_fractions(std::span<const double> weights,
                                                    double mean_keep, KeepBounds bounds,
                                                    DagcVariant variant) {
  GRADGATE_RETURN_IF_ERROR(check_inputs(weights, mean_keep, bounds));
  const double total = mean_keep * static_cast<double>(weights.size());
  return variant == DagcVariant::kExact ? exact(weights, total, bounds)
                                        : approximate(weights, total, bounds);
}

}  // namespace gradgate::control
