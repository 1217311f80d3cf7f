// Tests of the debug assertions (gradgate/base/check.h): a broken invariant aborts naming the
// condition, file and reason where they are on, and costs nothing where they are off.
#include "gradgate/base/check.h"

#include <gtest/gtest.h>

namespace gradgate {
namespace {

int checked_half(int even) {
  GRADGATE_DCHECK(even % 2 == 0, "halves of even numbers only");
  return even / 2;
}

TEST(DcheckDeathTest, ABrokenInvariantAbortsWithItsReasonWhereChecksAreOn) {
  EXPECT_EQ(checked_half(8), 4);
  if (GRADGATE_DCHECK_IS_ON) {
    EXPECT_DEATH(checked_half(7),
                 "check_test.cc:[0-9]+: invariant broken: even % 2 == 0 \\(halves of even numbers "
                 "only\\)");
  } else {
    EXPECT_EQ(checked_half(7), 3);  // compiled out: no check, no abort
  }
}

}  // namespace
}  // namespace gradgate
