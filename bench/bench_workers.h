// What the gateway benchmarks share: C-API workers in this process connected to a LocalJob's
// gateways, a failing call turned into an exception, repeated timing, and gradient-like inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gradgate/client.h"
#include "local_job.h"

namespace gradgate::bench {

/// Throws std::runtime_error naming `what` and the library's message unless `status` is GG_OK.
void check(gg_status status, const char* what);

/// Median seconds of `run` (which returns its own seconds), after `warmup` untimed runs, repeated
/// for at least `min_seconds` in all, 3 to 50 times.
double median_seconds(const std::function<double()>& run, int warmup, double min_seconds);

/// `elements` normally distributed values, the same for the same seed.
std::vector<float> random_gradient(size_t elements, uint32_t seed);

/// The job's workers: one C-API client per local worker of every gateway, in this process, in
/// rank order (gateway by gateway).
class Workers {
 public:
  explicit Workers(const LocalJob& job);
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  /// Declares one fp32 tensor of `elements` on every worker; in rank order.
  std::vector<gg_tensor*> declare(const std::string& name, size_t elements);
  size_t size() const { return clients_.size(); }

 private:
  std::vector<gg_client*> clients_;
};

}  // namespace gradgate::bench
