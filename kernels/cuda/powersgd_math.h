// powersgd's small-matrix arithmetic, host-device: the shared random basis, the modified
// Gram-Schmidt that orthonormalises the summed P, and the unit-norm scaling of the summed Q. The
// rules are those of the CPU codec (kernels/cpu/powersgd_codec.cc); they are written once against
// a Team of threads that split the rows of a matrix between them and sum doubles in a fixed order,
// so that the CUDA kernels (a thread block as the team) and the host tests (one thread) run the
// same code, and every worker with the same input gets the same bits.
//
// A Team provides: uint32_t rank() and size() (this thread and the team's thread count), and
// double sum(double part), which every thread of the team calls with its part and which returns
// the total to all of them. Thread t owns the elements t, t + size, t + 2 size, ... of each column
// and is the only one to read or write them, so nothing else needs a barrier.
//
// Pure functions of their arguments: nothing is allocated.
#pragma once

#include <cmath>
#include <cstdint>

#include "gradgate/kernels/philox.h"

namespace gradgate::kernels::cuda::powersgd {

/// The largest rank a frame may carry.
inline constexpr uint32_t kMaxRank = 64;

/// Gram-Schmidt: a column whose norm after projection is at most this fraction of its norm before
/// is taken as linearly dependent on the earlier ones and set to zero.
inline constexpr double kDependentColumn = 1e-4;

/// The Philox key of a stream's first basis, the same on every worker.
GRADGATE_HOST_DEVICE inline uint64_t basis_key(uint64_t job_seed, uint32_t tensor_id) {
  return mix64(job_seed ^ tensor_id);
}

/// The key that redraws the columns of Q that the sum of step `step` zeroed.
GRADGATE_HOST_DEVICE inline uint64_t redraw_key(uint64_t basis, uint64_t step) {
  return mix64(basis ^ mix64(step + 1));
}

/// Element `index` of the uniform [-1, 1) sequence of `key`: Philox4x32-10 on counter
/// (index / 4, 0, 0), lane index % 4.
GRADGATE_HOST_DEVICE inline float shared_uniform(uint64_t key, uint64_t index) {
  const uint64_t block = index / 4;
  const Philox4 bits =
      philox4x32({{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0}},
                 static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  return 2.0f * uniform_from_bits(bits.v[index % 4]) - 1.0f;
}

/// p_hat = p (rows x rank, row-major) with orthonormal columns, by modified Gram-Schmidt in
/// double; a column that is ~0 after projection becomes zero. `w` is rank x rows doubles of
/// working space (column k at w + k * rows).
template <typename Team>
GRADGATE_HOST_DEVICE void orthonormalise(Team& team, const float* p, uint64_t rows, uint32_t rank,
                                         double* w, float* p_hat) {
  const uint64_t first = team.rank(), stride = team.size();
  for (uint64_t i = first; i < rows; i += stride) {
    for (uint32_t k = 0; k < rank; ++k) w[k * rows + i] = p[i * rank + k];
  }
  for (uint32_t k = 0; k < rank; ++k) {
    double* v = w + k * rows;
    double squares = 0.0, next = 0.0;  // next: this thread's part of v . u_0
    for (uint64_t i = first; i < rows; i += stride) {
      squares += v[i] * v[i];
      if (k > 0) next += v[i] * w[i];
    }
    const double before = sqrt(team.sum(squares));
    // Projection l subtracts (v . u_l) u_l and gathers the part of the next dot product (or of
    // |v|^2 after the last) in the same pass.
    for (uint32_t l = 0; l < k; ++l) {
      const double dot = team.sum(next);
      const double* u = w + l * rows;
      const double* following = l + 1 < k ? u + rows : v;
      next = 0.0;
      for (uint64_t i = first; i < rows; i += stride) {
        if (dot != 0.0) v[i] -= dot * u[i];
        next += v[i] * following[i];
      }
    }
    const double after = sqrt(k > 0 ? team.sum(next) : team.sum(squares));
    const bool dependent = !(after > kDependentColumn * before) || !(after > 0.0);
    const double inv = dependent ? 0.0 : 1.0 / after;
    for (uint64_t i = first; i < rows; i += stride) {
      v[i] = dependent ? 0.0 : v[i] * inv;
      p_hat[i * rank + k] = static_cast<float>(v[i]);
    }
  }
}

/// |column k of q|^2 (q: cols x rank, row-major), in double.
template <typename Team>
GRADGATE_HOST_DEVICE double column_squares(Team& team, const float* q, uint64_t cols, uint32_t rank,
                                           uint32_t k) {
  double part = 0.0;
  for (uint64_t j = team.rank(); j < cols; j += team.size()) {
    const double v = q[j * rank + k];
    part += v * v;
  }
  return team.sum(part);
}

/// Scales column k of q (cols x rank, row-major) to unit norm (in double, so nothing overflows).
/// Where `redraw` is set, or where the column is all zeros, it is first drawn afresh from
/// shared_uniform(key, j * rank + k).
template <typename Team>
GRADGATE_HOST_DEVICE void normalise_column(Team& team, float* q, uint64_t cols, uint32_t rank,
                                           uint32_t k, uint64_t key, bool redraw) {
  const uint64_t first = team.rank(), stride = team.size();
  double sq = column_squares(team, q, cols, rank, k);
  if (redraw || sq == 0.0) {  // a float column is all zeros exactly when its double |q|^2 is 0
    for (uint64_t j = first; j < cols; j += stride) {
      q[j * rank + k] = shared_uniform(key, j * rank + k);
    }
    sq = column_squares(team, q, cols, rank, k);
  }
  const double inv = sq > 0.0 ? 1.0 / sqrt(sq) : 1.0;
  for (uint64_t j = first; j < cols; j += stride) {
    q[j * rank + k] = static_cast<float>(q[j * rank + k] * inv);
  }
}

}  // namespace gradgate::kernels::cuda::powersgd
