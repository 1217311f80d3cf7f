// powersgd: layer-wise low-rank compression (PowerSGD, Vogels et al., NeurIPS 2019). Each step
// runs one warm-started power iteration, and all workers share the basis, so that the frames of
// both rounds are summable.
//
// Matrix shape. A tensor of n elements is compressed as a rows x cols matrix M:
//   - desc.rows x desc.cols when both are non-zero; rows * cols must equal n (make_stream returns
//     kInvalidArgument when only one of them is set or when their product is not n);
//   - otherwise (the 1-D rule) cols = ceil(sqrt(n)) and rows = ceil(n / cols).
// M is the tensor in row-major order, zero-padded at the end; the padding is never written
// anywhere (not to the residual, not to the output). The rank is r = min(rank, rows, cols).
//
// One step on one worker (E is the error-feedback residual, zero when error feedback is off):
//   round 0   M = grad + E; P = M Q;              payload [u32 rows][u32 cols][f32 P, rows x r]
//   absorb 0  P_hat = the sum of P with its columns orthonormalised (modified Gram-Schmidt in
//             double; a column that is ~0 after projection becomes zero)
//   round 1   Q_w = M^T P_hat;                    payload [u32 rows][u32 cols][f32 Q, cols x r]
//             then E = M - P_hat Q_w^T
//   absorb 1  Q = the sum of Q_w, each column scaled to unit norm: the warm start of the next step
//   decode    acc += P_hat Q^T, for the sum Q of round 1
// Round 0 leaves E as it is. The frame's param is r; its flags are zero. Matrices are row-major.
//
// Q starts at the first round-0 encode as uniform [-1, 1) values from Philox4x32-10 keyed by
// mix64(job_seed ^ tensor_id), the same on every worker, with each column scaled to unit norm.
// The scale of Q's columns does not change P_hat (Gram-Schmidt normalises P's columns), so Q is
// kept at unit column norm: P = M Q then stays within |M|'s range from step to step instead of
// carrying the last gradient's scale. A column of the summed Q that is exactly zero (a zero or
// rank-deficient gradient zeroed that direction of P_hat) would stay zero forever, so absorb(1)
// draws it afresh from the same key mixed with the step: again the same everywhere.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "codecs.h"
#include "gradgate/kernels/philox.h"
#include "loops.h"

namespace gradgate::kernels::cpu {
namespace {

constexpr size_t kShapeBytes = 2 * sizeof(uint32_t);
constexpr uint64_t kMaxRank = 64;
/// Gram-Schmidt: a column whose norm after projection is at most this fraction of its norm before
/// is taken as linearly dependent on the earlier ones and set to zero.
constexpr double kDependentColumn = 1e-4;

struct Shape {
  size_t rows = 0;
  size_t cols = 0;
};

size_t ceil_sqrt(size_t n) {
  auto root = static_cast<size_t>(std::sqrt(static_cast<double>(n)));
  while (root > 0 && root * root >= n) --root;  // now root^2 < n (or root == 0)
  while (root * root < n) ++root;               // the least root with root^2 >= n
  return root;
}

/// The 1-D rule: cols = ceil(sqrt(n)), rows = ceil(n / cols).
Shape one_d_shape(size_t n) {
  const size_t cols = std::max<size_t>(1, ceil_sqrt(n));
  return {std::max<size_t>(1, (n + cols - 1) / cols), cols};
}

Result<Shape> matrix_shape(const TensorDesc& desc) {
  if (desc.rows == 0 && desc.cols == 0) return one_d_shape(desc.elements);
  if (desc.rows == 0 || desc.cols == 0 || desc.elements % desc.cols != 0 ||
      desc.rows != desc.elements / desc.cols) {
    return Status(ErrorCode::kInvalidArgument,
                  "powersgd: matrix shape " + std::to_string(desc.rows) + " x " +
                      std::to_string(desc.cols) + " does not hold the tensor's " +
                      std::to_string(desc.elements) +
                      " elements (give both rows and cols, or neither)");
  }
  return Shape{desc.rows, desc.cols};
}

size_t payload_bytes_for(size_t dim, size_t rank) {
  return kShapeBytes + sizeof(float) * dim * rank;
}

struct PowersgdState {
  size_t rows = 0;
  size_t cols = 0;
  size_t rank = 0;
  std::vector<float> q;      // cols x rank: the right basis, warm-started from the last step
  std::vector<float> p_hat;  // rows x rank: the orthonormalised sum of this step's P
  uint64_t key = 0;          // Philox key, mix64(job_seed ^ tensor_id), once q_seeded
  bool q_seeded = false;
  bool p_hat_valid = false;  // P_hat belongs to step p_hat_step
  uint64_t p_hat_step = 0;

  size_t memory_bytes() const { return (q.size() + p_hat.size()) * sizeof(float); }
};
using PowersgdStream = StreamWith<PowersgdState>;

/// out[i] = uniform [-1, 1) from Philox4x32-10 with `key` and counter (i / 4, 0, 0), lane i % 4.
void fill_shared_uniform(uint64_t key, std::span<float> out) {
  const auto k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (size_t block = 0; 4 * block < out.size(); ++block) {
    const Philox4 bits = philox4x32(
        {{static_cast<uint32_t>(block), static_cast<uint32_t>(uint64_t{block} >> 32), 0, 0}}, k0,
        k1);
    for (size_t lane = 0; lane < 4 && 4 * block + lane < out.size(); ++lane) {
      out[4 * block + lane] = 2.0f * uniform_from_bits(bits.v[lane]) - 1.0f;
    }
  }
}

/// Row i of M = grad + residual (residual may be null) into `row`; returns the row's real length
/// (the last row may be shorter than cols: the rest is padding).
size_t load_row(const float* grad, const float* residual, size_t n, size_t cols, size_t i,
                float* row) {
  const size_t begin = i * cols;
  const size_t len = std::min(cols, n - begin);
  if (residual) {
    for (size_t j = 0; j < len; ++j) row[j] = grad[begin + j] + residual[begin + j];
  } else {
    std::memcpy(row, grad + begin, len * sizeof(float));
  }
  return len;
}

/// out[j] = sum_k p[k] * qt[k * cols + j] for j < len: one row of P_hat Q^T, with Q given
/// transposed (rank x cols) so that each term is a contiguous axpy; four basis columns per pass.
void reconstruct_row(const float* p, const float* qt, size_t rank, size_t cols, size_t len,
                     float* out) {
  std::fill(out, out + len, 0.0f);
  size_t k = 0;
  for (; k + 4 <= rank; k += 4) {
    const float p0 = p[k], p1 = p[k + 1], p2 = p[k + 2], p3 = p[k + 3];
    const float* q0 = qt + k * cols;
    const float *q1 = q0 + cols, *q2 = q1 + cols, *q3 = q2 + cols;
    for (size_t j = 0; j < len; ++j) {
      out[j] += (p0 * q0[j] + p1 * q1[j]) + (p2 * q2[j] + p3 * q3[j]);
    }
  }
  for (; k < rank; ++k) {
    const float pk = p[k];
    const float* qk = qt + k * cols;
    for (size_t j = 0; j < len; ++j) out[j] += pk * qk[j];
  }
}

/// A validated payload: the matrix shape and the values (copied out, so alignment is no concern).
struct Payload {
  size_t rows = 0;
  size_t cols = 0;
  size_t rank = 0;
  std::vector<float> values;  // dim x rank, dim = rows (round 0) or cols (round 1)
};

class PowersgdCodec final : public CpuCodec {
 public:
  using CpuCodec::CpuCodec;

  int rounds() const override { return 2; }

  Result<std::unique_ptr<Stream>> make_stream(const TensorDesc& desc) const override {
    GRADGATE_RETURN_IF_ERROR(check_tensor(desc));
    auto shape = matrix_shape(desc);
    if (!shape.ok()) return shape.status();
    const size_t rank = rank_for(*shape);
    auto stream = std::make_unique<PowersgdStream>(desc, keeps_residual());
    PowersgdState& st = stream->state;
    st.rows = shape->rows;
    st.cols = shape->cols;
    st.rank = rank;
    st.q.assign(st.cols * rank, 0.0f);
    st.p_hat.assign(st.rows * rank, 0.0f);
    return std::unique_ptr<Stream>(std::move(stream));
  }

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    auto shape = matrix_shape(desc);
    const Shape s = shape.ok() ? *shape : one_d_shape(desc.elements);
    return kFrameHeaderBytes + payload_bytes_for(std::max(s.rows, s.cols), rank_for(s));
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    auto* own = dynamic_cast<PowersgdStream*>(&stream);
    if (own == nullptr) {
      return Status(ErrorCode::kInvalidArgument, spec() + ": the stream was not made by powersgd");
    }
    PowersgdState& st = own->state;
    const size_t dim = round == 0 ? st.rows : st.cols;
    const size_t bytes = kFrameHeaderBytes + payload_bytes_for(dim, st.rank);
    GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, bytes));
    const size_t n = grad.size();
    float* residual = stream.residual().empty() ? nullptr : stream.residual().data();
    // The residual is always finite; were grad + residual to overflow, the product below turns
    // non-finite and is caught before anything changes.
    if (const size_t bad = loops().count_nonfinite(grad.data(), n); bad != 0) {
      return nonfinite_gradient(stream, bad);
    }
    if (round == 1 && (!st.p_hat_valid || st.p_hat_step != ctx.step)) {
      return Status(ErrorCode::kInvalidArgument,
                    spec() + ": round 1 of step " + std::to_string(ctx.step) +
                        " needs P_hat of the same step: absorb round 0 first");
    }

    std::vector<float> values;
    std::vector<float> qt;  // round 1: Q_w transposed (rank x cols)
    if (round == 0) {
      if (!st.q_seeded) {
        st.key = mix64(ctx.job_seed ^ stream.desc().tensor_id);
        fill_shared_uniform(st.key, st.q);
        normalise_q_columns(st);
        st.q_seeded = true;
      }
      values = multiply_q(st, grad.data(), residual, n);
    } else {
      qt = multiply_p_hat_transposed(st, grad.data(), residual, n);
      values = transpose(qt, st.rank, st.cols);
    }
    if (const size_t bad = loops().count_nonfinite(values.data(), values.size()); bad != 0) {
      return overflow("gradient of tensor " + std::to_string(stream.desc().tensor_id) +
                      " overflows the float range in the low-rank product; nothing was encoded");
    }

    if (round == 0) {
      st.p_hat_valid = false;  // a new step begins: the old P_hat no longer applies
    } else if (residual != nullptr) {
      // E = M - P_hat Q_w^T over the real elements.
      std::vector<float> row(st.cols), approx(st.cols);
      for (size_t i = 0; i < st.rows; ++i) {
        const size_t len = load_row(grad.data(), residual, n, st.cols, i, row.data());
        reconstruct_row(&st.p_hat[i * st.rank], qt.data(), st.rank, st.cols, len, approx.data());
        float* e = residual + i * st.cols;
        for (size_t j = 0; j < len; ++j) e[j] = row[j] - approx[j];
      }
    }

    write_payload(st.rows, st.cols, values, out);
    return seal(round, ctx, stream, bytes, out, 0, static_cast<uint32_t>(st.rank));
  }

  Status absorb(int round, const FrameView& summed, Stream& stream) const override {
    auto* own = dynamic_cast<PowersgdStream*>(&stream);
    if (own == nullptr) {
      return Status(ErrorCode::kInvalidArgument, spec() + ": the stream was not made by powersgd");
    }
    GRADGATE_RETURN_IF_ERROR(check_absorb(round, summed));
    auto payload = parse_payload(summed);
    if (!payload.ok()) return payload.status();
    PowersgdState& st = own->state;
    GRADGATE_RETURN_IF_ERROR(check_stream_matches(summed, *payload, stream));

    if (round == 0) {
      orthonormalise(payload->values, st);
      st.p_hat_valid = true;
      st.p_hat_step = summed.header.step;
      return {};
    }
    if (!st.q_seeded || !st.p_hat_valid || st.p_hat_step != summed.header.step) {
      return Status(ErrorCode::kInvalidArgument,
                    spec() + ": round 1 of step " + std::to_string(summed.header.step) +
                        " needs P_hat of the same step: absorb round 0 first");
    }
    st.q = std::move(payload->values);
    reseed_zero_columns(st, summed.header.step);
    normalise_q_columns(st);
    return {};
  }

  Status decode_accumulate(const FrameView& frame, const Stream* stream,
                           std::span<float> acc) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, acc));
    if (frame.header.round != 1) {
      return Status(ErrorCode::kInvalidArgument,
                    spec() + ": a round-0 frame cannot be decoded: decode the last round's frame");
    }
    auto payload = parse_payload(frame);
    if (!payload.ok()) return payload.status();
    const auto* own = dynamic_cast<const PowersgdStream*>(stream);
    if (own == nullptr) {
      return Status(ErrorCode::kInvalidArgument,
                    spec() + ": decoding needs the stream (with its P_hat) made by powersgd");
    }
    GRADGATE_RETURN_IF_ERROR(check_stream_matches(frame, *payload, *stream));
    const PowersgdState& st = own->state;
    if (!st.p_hat_valid || st.p_hat_step != frame.header.step) {
      return Status(ErrorCode::kInvalidArgument, spec() + ": the stream holds no P_hat for step " +
                                                     std::to_string(frame.header.step) +
                                                     ": absorb round 0 first");
    }

    const std::vector<float> qt = transpose(payload->values, st.cols, st.rank);
    const size_t n = acc.size();
    std::vector<float> approx(st.cols);
    for (size_t i = 0; i < st.rows; ++i) {
      const size_t len = std::min(st.cols, n - i * st.cols);
      reconstruct_row(&st.p_hat[i * st.rank], qt.data(), st.rank, st.cols, len, approx.data());
      float* a = acc.data() + i * st.cols;
      for (size_t j = 0; j < len; ++j) a[j] += approx[j];
    }
    return {};
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    const size_t bytes = kFrameHeaderBytes + a.payload.size();
    GRADGATE_RETURN_IF_ERROR(check_add(a, b, out, bytes));
    if (a.header.param != b.header.param) {
      return Status(ErrorCode::kIncompatible, spec() + ": frames differ in rank");
    }
    auto pa = parse_payload(a);
    if (!pa.ok()) return pa.status();
    auto pb = parse_payload(b);
    if (!pb.ok()) return pb.status();
    if (pa->rows != pb->rows || pa->cols != pb->cols) {
      return Status(ErrorCode::kIncompatible, spec() + ": frames differ in matrix shape");
    }
    std::vector<float>& sum = pa->values;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += pb->values[i];
    if (loops().count_nonfinite(sum.data(), sum.size()) != 0) {
      return sum_overflow("float");
    }
    write_payload(pa->rows, pa->cols, sum, out);
    FrameHeader h = a.header;
    h.payload_bytes = static_cast<uint32_t>(a.payload.size());
    seal_frame(h, out);
    return bytes;
  }

 private:
  size_t rank_for(const Shape& s) const {
    return std::min({static_cast<size_t>(std::clamp(params().rank, 1, 64)), s.rows, s.cols});
  }

  /// Checks the payload against the header and itself (never reading out of bounds) and copies
  /// its values out.
  static Result<Payload> parse_payload(const FrameView& frame) {
    const FrameHeader& h = frame.header;
    if (h.flags != 0) return malformed(frame, "unknown flags");
    if (h.round > 1) return malformed(frame, "round out of range");
    if (h.param < 1 || h.param > kMaxRank) {
      return malformed(frame, "rank " + std::to_string(h.param) + " is out of [1, 64]");
    }
    if (frame.payload.size() < kShapeBytes) {
      return malformed(frame, "payload is shorter than its shape prefix");
    }
    uint32_t rows32 = 0, cols32 = 0;
    std::memcpy(&rows32, frame.payload.data(), sizeof(uint32_t));
    std::memcpy(&cols32, frame.payload.data() + sizeof(uint32_t), sizeof(uint32_t));
    const uint64_t rows = rows32, cols = cols32, rank = h.param, n = h.element_count;
    if (rows == 0 || cols == 0 || rows * cols < n || (rows - 1) * cols >= n) {
      return malformed(frame, "matrix shape " + std::to_string(rows) + " x " +
                                  std::to_string(cols) + " does not fit " + std::to_string(n) +
                                  " elements with less than one row of padding");
    }
    if (rank > std::min(rows, cols)) {
      return malformed(frame, "rank " + std::to_string(rank) + " exceeds the matrix shape");
    }
    const uint64_t dim = h.round == 0 ? rows : cols;
    if (frame.payload.size() != kShapeBytes + sizeof(float) * dim * rank) {
      return malformed(frame, "payload is not the shape and " + std::to_string(dim) + " x " +
                                  std::to_string(rank) + " fp32 values");
    }
    Payload p;
    p.rows = rows;
    p.cols = cols;
    p.rank = rank;
    p.values.resize(dim * rank);
    std::memcpy(p.values.data(), frame.payload.data() + kShapeBytes,
                p.values.size() * sizeof(float));
    if (loops().count_nonfinite(p.values.data(), p.values.size()) != 0) {
      return malformed(frame, "payload holds NaN or infinite values");
    }
    return p;
  }

  /// kInvalidArgument unless the frame describes the stream's tensor, shape and rank.
  Status check_stream_matches(const FrameView& frame, const Payload& p,
                              const Stream& stream) const {
    const auto& st = static_cast<const PowersgdStream&>(stream).state;
    if (frame.header.element_count != stream.desc().elements || p.rows != st.rows ||
        p.cols != st.cols || p.rank != st.rank) {
      return Status(ErrorCode::kInvalidArgument,
                    spec() + ": frame of a " + std::to_string(p.rows) + " x " +
                        std::to_string(p.cols) + " rank-" + std::to_string(p.rank) +
                        " matrix does not match the stream's " + std::to_string(st.rows) + " x " +
                        std::to_string(st.cols) + " rank-" + std::to_string(st.rank));
    }
    return {};
  }

  /// P = M Q (rows x rank): for each row of M, rank dot products with the columns of Q (taken
  /// from Q transposed, so that each is contiguous).
  static std::vector<float> multiply_q(const PowersgdState& st, const float* grad,
                                       const float* residual, size_t n) {
    const size_t r = st.rank, cols = st.cols;
    const std::vector<float> qt = transpose(st.q, cols, r);
    std::vector<float> p(st.rows * r, 0.0f), row(cols);
    for (size_t i = 0; i < st.rows; ++i) {
      const size_t len = load_row(grad, residual, n, cols, i, row.data());
      for (size_t k = 0; k < r; ++k) p[i * r + k] = dot(row.data(), &qt[k * cols], len);
    }
    return p;
  }

  /// sum a[j] * b[j] in 16 interleaved partial sums: a fixed order that the compiler vectorises.
  static float dot(const float* a, const float* b, size_t n) {
    constexpr size_t kLanes = 16;
    float part[kLanes] = {};
    size_t j = 0;
    for (; j + kLanes <= n; j += kLanes) {
      for (size_t l = 0; l < kLanes; ++l) part[l] += a[j + l] * b[j + l];
    }
    const size_t tail = n - j;
    for (size_t l = 0; l < tail && l < kLanes; ++l) part[l] += a[j + l] * b[j + l];
    float sum = 0.0f;
    for (size_t l = 0; l < kLanes; ++l) sum += part[l];
    return sum;
  }

  /// Q_w^T = P_hat^T M (rank x cols): contiguous axpys of rows of M into the rows of Q_w^T, four
  /// rows of M at a time where no row is short.
  static std::vector<float> multiply_p_hat_transposed(const PowersgdState& st, const float* grad,
                                                      const float* residual, size_t n) {
    const size_t r = st.rank, cols = st.cols;
    const float* p = st.p_hat.data();
    std::vector<float> qt(r * cols, 0.0f), block(4 * cols);
    const float *m0 = block.data(), *m1 = m0 + cols, *m2 = m1 + cols, *m3 = m2 + cols;
    const size_t full_rows = n / cols;
    size_t i = 0;
    for (; i + 4 <= full_rows; i += 4) {
      for (size_t b = 0; b < 4; ++b) load_row(grad, residual, n, cols, i + b, &block[b * cols]);
      for (size_t k = 0; k < r; ++k) {
        const float a0 = p[i * r + k], a1 = p[(i + 1) * r + k], a2 = p[(i + 2) * r + k],
                    a3 = p[(i + 3) * r + k];
        float* qk = &qt[k * cols];
        for (size_t j = 0; j < cols; ++j) {
          qk[j] += (a0 * m0[j] + a1 * m1[j]) + (a2 * m2[j] + a3 * m3[j]);
        }
      }
    }
    for (; i < st.rows; ++i) {
      const size_t len = load_row(grad, residual, n, cols, i, block.data());
      for (size_t k = 0; k < r; ++k) {
        const float a = p[i * r + k];
        float* qk = &qt[k * cols];
        for (size_t j = 0; j < len; ++j) qk[j] += a * m0[j];
      }
    }
    return qt;
  }

  /// The transpose of a rows x cols row-major matrix.
  static std::vector<float> transpose(const std::vector<float>& in, size_t rows, size_t cols) {
    std::vector<float> out(in.size());
    for (size_t i = 0; i < rows; ++i) {
      for (size_t j = 0; j < cols; ++j) out[j * rows + i] = in[i * cols + j];
    }
    return out;
  }

  /// P_hat = P (rows x rank) with orthonormal columns, by modified Gram-Schmidt in double. The
  /// arithmetic is a fixed sequence, so the same summed P gives bit-identical P_hat everywhere.
  static void orthonormalise(const std::vector<float>& p, PowersgdState& st) {
    const size_t rows = st.rows, r = st.rank;
    std::vector<double> w(r * rows);  // column-major: column k at w[k * rows]
    for (size_t i = 0; i < rows; ++i) {
      for (size_t k = 0; k < r; ++k) w[k * rows + i] = p[i * r + k];
    }
    for (size_t k = 0; k < r; ++k) {
      double* v = &w[k * rows];
      const double before = norm(v, rows);
      for (size_t l = 0; l < k; ++l) {
        const double* u = &w[l * rows];
        double dot = 0.0;
        for (size_t i = 0; i < rows; ++i) dot += v[i] * u[i];
        if (dot == 0.0) continue;
        for (size_t i = 0; i < rows; ++i) v[i] -= dot * u[i];
      }
      const double after = norm(v, rows);
      if (!(after > kDependentColumn * before) || !(after > 0.0)) {
        std::fill(v, v + rows, 0.0);
      } else {
        const double inv = 1.0 / after;
        for (size_t i = 0; i < rows; ++i) v[i] *= inv;
      }
    }
    for (size_t i = 0; i < rows; ++i) {
      for (size_t k = 0; k < r; ++k) st.p_hat[i * r + k] = static_cast<float>(w[k * rows + i]);
    }
  }

  static double norm(const double* v, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += v[i] * v[i];
    return std::sqrt(sum);
  }

  /// Draws every all-zero column of Q afresh from the shared key mixed with the step.
  static void reseed_zero_columns(PowersgdState& st, uint64_t step) {
    const size_t r = st.rank;
    std::vector<bool> zero(r, true);
    for (size_t j = 0; j < st.cols; ++j) {
      for (size_t k = 0; k < r; ++k) {
        if (st.q[j * r + k] != 0.0f) zero[k] = false;
      }
    }
    if (std::none_of(zero.begin(), zero.end(), [](bool z) { return z; })) return;
    std::vector<float> fresh(st.q.size());
    fill_shared_uniform(mix64(st.key ^ mix64(step + 1)), fresh);
    for (size_t j = 0; j < st.cols; ++j) {
      for (size_t k = 0; k < r; ++k) {
        if (zero[k]) st.q[j * r + k] = fresh[j * r + k];
      }
    }
  }

  /// Scales each column of Q to unit norm (computed in double, so nothing overflows).
  static void normalise_q_columns(PowersgdState& st) {
    const size_t r = st.rank;
    std::vector<double> sq(r, 0.0);
    for (size_t j = 0; j < st.cols; ++j) {
      for (size_t k = 0; k < r; ++k) sq[k] += double{st.q[j * r + k]} * st.q[j * r + k];
    }
    std::vector<double> inv(r, 1.0);
    for (size_t k = 0; k < r; ++k) {
      if (sq[k] > 0.0) inv[k] = 1.0 / std::sqrt(sq[k]);
    }
    for (size_t j = 0; j < st.cols; ++j) {
      for (size_t k = 0; k < r; ++k) st.q[j * r + k] = static_cast<float>(st.q[j * r + k] * inv[k]);
    }
  }

  static void write_payload(size_t rows, size_t cols, const std::vector<float>& values,
                            std::span<std::byte> out) {
    std::byte* p = out.data() + kFrameHeaderBytes;
    const auto rows32 = static_cast<uint32_t>(rows), cols32 = static_cast<uint32_t>(cols);
    std::memcpy(p, &rows32, sizeof(uint32_t));
    std::memcpy(p + sizeof(uint32_t), &cols32, sizeof(uint32_t));
    std::memcpy(p + kShapeBytes, values.data(), values.size() * sizeof(float));
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_powersgd_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<PowersgdCodec>(params));
}

}  // namespace gradgate::kernels::cpu
