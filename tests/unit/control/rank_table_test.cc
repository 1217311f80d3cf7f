// RankTable: names keep their ranks, new names get the lowest free rank, dead holders lose
// theirs (by claim age and by staleness of the gateway at the rank), a full job is refused and a
// new job size wins. Time is passed in, so no test waits.
#include "control/registry/rank_table.h"

#include <gtest/gtest.h>

namespace gradgate::control {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kJob = 7;
constexpr milliseconds kStaleAfter{5000};

class RankTableTest : public ::testing::Test {
 protected:
  // A claim that must succeed; returns what it did.
  RankClaim claim(const std::string& name, uint32_t nodes, const std::set<uint32_t>& live = {}) {
    auto claimed = table_.claim(kJob, name, nodes, live, now_);
    EXPECT_TRUE(claimed.ok()) << claimed.status().to_string();
    return claimed.ok() ? *claimed : RankClaim{};
  }

  RankTable table_{kStaleAfter};
  RankTable::Clock::time_point now_ = RankTable::Clock::time_point{} + std::chrono::hours(1);
};

TEST_F(RankTableTest, NewNamesGetTheLowestFreeRanks) {
  const RankClaim a = claim("node-a", 3);
  EXPECT_EQ(a.rank, 0u);
  EXPECT_TRUE(a.new_assignment);
  EXPECT_FALSE(a.took_from);
  EXPECT_FALSE(a.resized_from);
  EXPECT_EQ(claim("node-b", 3).rank, 1u);
  EXPECT_EQ(claim("node-c", 3).rank, 2u);
  ASSERT_NE(table_.holder_of(kJob, 1), nullptr);
  EXPECT_EQ(*table_.holder_of(kJob, 1), "node-b");
  EXPECT_EQ(table_.holder_of(kJob + 1, 1), nullptr);
}

TEST_F(RankTableTest, TheSameNameGetsTheSameRankBack) {
  claim("node-a", 3);
  claim("node-b", 3);
  now_ += milliseconds(100);
  const RankClaim again = claim("node-b", 3);
  EXPECT_EQ(again.rank, 1u);
  EXPECT_FALSE(again.new_assignment);
  // Even when it was dead meanwhile: nobody took its rank.
  now_ += kStaleAfter * 3;
  EXPECT_EQ(claim("node-b", 3).rank, 1u);
}

TEST_F(RankTableTest, ClaimingRefreshesTheClaim) {
  claim("node-a", 1);
  now_ += kStaleAfter - milliseconds(1);
  claim("node-a", 1);  // refreshed: live for another kStaleAfter
  now_ += kStaleAfter - milliseconds(1);
  EXPECT_FALSE(table_.claim(kJob, "node-b", 1, {}, now_).ok());
}

TEST_F(RankTableTest, ARankReportedByAnUnnamedGatewayIsSkipped) {
  // A gateway with a fixed rank 0, or one that claimed before the controller restarted.
  EXPECT_EQ(claim("node-a", 3, {0}).rank, 1u);
  EXPECT_EQ(claim("node-b", 3, {0, 1}).rank, 2u);
}

TEST_F(RankTableTest, AHolderWithAnOldClaimIsKeptWhileItsGatewayReports) {
  claim("node-a", 2);
  claim("node-b", 2);
  now_ += kStaleAfter * 2;  // both claims are old; node-a's gateway still reports at rank 0
  const RankClaim c = claim("node-c", 2, {0});
  EXPECT_EQ(c.rank, 1u);
  EXPECT_EQ(c.took_from, "node-b");
}

TEST_F(RankTableTest, ADeadHoldersRankIsTakenOverByClaimAge) {
  claim("node-a", 2);
  claim("node-b", 2);
  now_ += kStaleAfter + milliseconds(1);
  claim("node-b", 2);  // node-b stays live by claiming; node-a, silent, is dead
  const RankClaim c = claim("node-c", 2);
  EXPECT_EQ(c.rank, 0u);
  EXPECT_TRUE(c.new_assignment);
  EXPECT_EQ(c.took_from, "node-a");
  EXPECT_EQ(*table_.holder_of(kJob, 0), "node-c");
  // node-a comes back: it lost rank 0 and finds no other free rank.
  auto back = table_.claim(kJob, "node-a", 2, {}, now_);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), ErrorCode::kResourceExhausted);
}

TEST_F(RankTableTest, ADeadHoldersRankIsTakenOverWhenItsGatewayIsStale) {
  claim("node-a", 2);
  claim("node-b", 2);
  now_ += kStaleAfter + milliseconds(1);
  // The registry lists node-b's gateway as live, node-a's as stale (absent from the set).
  const RankClaim c = claim("node-c", 2, {1});
  EXPECT_EQ(c.rank, 0u);
  EXPECT_EQ(c.took_from, "node-a");
  // node-a comes back while rank 1 is live and rank 0 is node-c's fresh claim.
  EXPECT_FALSE(table_.claim(kJob, "node-a", 2, {1}, now_).ok());
  // Once node-b's gateway is gone too, node-a takes rank 1.
  const RankClaim back = claim("node-a", 2, {});
  EXPECT_EQ(back.rank, 1u);
  EXPECT_EQ(back.took_from, "node-b");
}

TEST_F(RankTableTest, AFullJobIsRefusedNamingTheHolders) {
  claim("node-a", 3);
  claim("node-b", 3);
  auto refused = table_.claim(kJob, "node-c", 3, {2}, now_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "job 7: all 3 ranks are held by live gateways: node-a=0, node-b=1, ?=2");
  // The refused name holds nothing; the holders keep their ranks.
  EXPECT_EQ(claim("node-a", 3).rank, 0u);
  EXPECT_EQ(table_.holder_of(kJob, 2), nullptr);
}

TEST_F(RankTableTest, TheRefusalOfALargeJobNamesTheFirstHolders) {
  std::set<uint32_t> live;
  for (uint32_t rank = 0; rank < 1000; ++rank) live.insert(rank);
  auto refused = table_.claim(kJob, "node-a", 1000, live, now_);
  ASSERT_FALSE(refused.ok());
  const std::string detail = refused.status().message();
  EXPECT_NE(detail.find("?=15, ... (984 more)"), std::string::npos) << detail;
  EXPECT_LT(detail.size(), 200u);
}

TEST_F(RankTableTest, ANewSizeWinsAndDropsHoldersBeyondIt) {
  claim("node-a", 3);
  claim("node-b", 3);
  claim("node-c", 3);
  const RankClaim shrunk = claim("node-a", 2);
  EXPECT_EQ(shrunk.rank, 0u);
  EXPECT_EQ(shrunk.resized_from, 3u);
  EXPECT_EQ(table_.holder_of(kJob, 2), nullptr);
  // node-c lost rank 2 and finds the job full; a larger job gives it a rank again.
  EXPECT_FALSE(table_.claim(kJob, "node-c", 2, {}, now_).ok());
  const RankClaim grown = claim("node-c", 4);
  EXPECT_EQ(grown.rank, 2u);
  EXPECT_TRUE(grown.new_assignment);
  EXPECT_EQ(grown.resized_from, 2u);
  EXPECT_EQ(claim("node-b", 4).rank, 1u);
}

TEST_F(RankTableTest, JobsAreIndependent) {
  claim("node-a", 1);
  auto other = table_.claim(kJob + 1, "node-b", 1, {}, now_);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->rank, 0u);
}

TEST_F(RankTableTest, AnEmptyNameOrNoNodesIsRefused) {
  EXPECT_EQ(table_.claim(kJob, "", 2, {}, now_).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(table_.claim(kJob, "node-a", 0, {}, now_).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace gradgate::control
