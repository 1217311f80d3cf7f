#include "control/decider/policy_version.h"

#include <algorithm>

namespace gradgate::control {

bool same_codecs(const std::vector<TensorDecision>& a, const std::vector<TensorDecision>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const TensorDecision& x, const TensorDecision& y) {
                      return x.tensor == y.tensor && x.codec_per_node == y.codec_per_node;
                    });
}

}  // namespace gradgate::control
