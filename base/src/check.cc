#include "gradgate/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace gradgate::base_internal {

void dcheck_failed(const char* condition, const char* file, int line, const char* what) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s (%s)\n", file, line, condition, what);
  std::abort();
}

}  // namespace gradgate::base_internal
