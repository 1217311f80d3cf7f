#include "control/policy/policy.h"

#include "control/policy/measurements_check.h"

namespace gradgate::control {

Result<PolicyDecision> Policy::decide(const Measurements& measurements) const {
  GRADGATE_RETURN_IF_ERROR(check_measurements(measurements));
  return decide_checked(measurements);
}

}  // namespace gradgate::control
