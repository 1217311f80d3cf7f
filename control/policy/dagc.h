// Data-aware non-uniform keep fractions (DAGC, Lu et al. 2023): gateways whose workers process
// more data compress less. For data weights w_i and a mean keep fraction k over P gateways:
//
//   minimise  sum_i w_i^2 / k_i   subject to  sum_i k_i = P k,  lo <= k_i <= hi
//
// The unclipped optimum is k_i = P k w_i / sum_j w_j. Two ways to honour the bounds:
//   kExact (dagc-r):       the exact optimum, k_i = clamp(c w_i, lo, hi) with the one c that
//                          meets the sum (found between the sorted clipping points);
//   kApproximate (dagc-a): the unclipped optimum clipped once, then the surplus or deficit spread
//                          over the gateways in proportion to their room to the bound it moves
//                          towards. Equal to kExact when nothing is clipped.
// Both return fractions within [lo, hi] that sum to P k up to rounding.
#pragma once

#include <span>
#include <vector>

#include "gradgate/base/status.h"

namespace gradgate::control {

enum class DagcVariant { kExact, kApproximate };

struct KeepBounds {
  double lo = 0.0;
  double hi = 1.0;
};

/// The keep fraction of each gateway. kInvalidArgument unless every weight is positive and
/// finite and 0 < lo <= mean_keep <= hi <= 1.
Result<std::vector<double>> allocate_keep_fractions(std::span<const double> weights,
                                                    double mean_keep, KeepBounds bounds,
                                                    DagcVariant variant);

}  // namespace gradgate::control
