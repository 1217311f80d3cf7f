// The documented mapping of the gateway's error codes to the client's statuses.
#include "gateway/ingress/status_mapping.h"

#include <gtest/gtest.h>

namespace gradgate::gateway {
namespace {

TEST(StatusMapping, FollowsTheDocumentedTable) {
  EXPECT_EQ(to_client_status(ErrorCode::kOk), GG_OK);
  EXPECT_EQ(to_client_status(ErrorCode::kInvalidArgument), GG_REJECTED);
  EXPECT_EQ(to_client_status(ErrorCode::kNotFound), GG_REJECTED);
  EXPECT_EQ(to_client_status(ErrorCode::kIncompatible), GG_REJECTED);
  EXPECT_EQ(to_client_status(ErrorCode::kUnsupported), GG_REJECTED);
  EXPECT_EQ(to_client_status(ErrorCode::kResourceExhausted), GG_RESOURCE_EXHAUSTED);
  EXPECT_EQ(to_client_status(ErrorCode::kTimeout), GG_PEER_FAILED);
  EXPECT_EQ(to_client_status(ErrorCode::kUnavailable), GG_PEER_FAILED);
  EXPECT_EQ(to_client_status(ErrorCode::kAborted), GG_PEER_FAILED);
  EXPECT_EQ(to_client_status(ErrorCode::kMalformedFrame), GG_PEER_FAILED);
  EXPECT_EQ(to_client_status(ErrorCode::kChecksumMismatch), GG_PEER_FAILED);
  EXPECT_EQ(to_client_status(ErrorCode::kInternal), GG_INTERNAL);
  EXPECT_EQ(to_client_status(ErrorCode::kNonFiniteGradient), GG_NONFINITE_GRADIENT);
}

}  // namespace
}  // namespace gradgate::gateway
