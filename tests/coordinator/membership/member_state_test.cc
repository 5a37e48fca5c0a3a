#include "coordinator/membership/member_state.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

using S = MemberState;

TEST(MemberStateTest, TheLifeOfAWorker) {
  EXPECT_TRUE(MemberStateMayBecome(S::kJoining, S::kActive));
  EXPECT_TRUE(MemberStateMayBecome(S::kJoining, S::kRemoved));
  EXPECT_FALSE(MemberStateMayBecome(S::kJoining, S::kDraining));
  EXPECT_TRUE(MemberStateMayBecome(S::kActive, S::kDown));
  EXPECT_TRUE(MemberStateMayBecome(S::kDown, S::kActive));
  EXPECT_TRUE(MemberStateMayBecome(S::kActive, S::kDraining));
  EXPECT_TRUE(MemberStateMayBecome(S::kDown, S::kDraining));
  EXPECT_TRUE(MemberStateMayBecome(S::kDraining, S::kDown));
  EXPECT_TRUE(MemberStateMayBecome(S::kDraining, S::kDrained));
  EXPECT_TRUE(MemberStateMayBecome(S::kDown, S::kDrained));
  EXPECT_TRUE(MemberStateMayBecome(S::kDown, S::kRemoved));
  EXPECT_TRUE(MemberStateMayBecome(S::kActive, S::kRemoved));
  // A draining worker never takes steps again, and nobody comes back
  // from having left.
  EXPECT_FALSE(MemberStateMayBecome(S::kDraining, S::kActive));
  EXPECT_FALSE(MemberStateMayBecome(S::kActive, S::kActive));
  for (S to : {S::kJoining, S::kActive, S::kDraining, S::kDrained, S::kDown,
               S::kRemoved}) {
    EXPECT_FALSE(MemberStateMayBecome(S::kDrained, to));
    EXPECT_FALSE(MemberStateMayBecome(S::kRemoved, to));
  }
  EXPECT_TRUE(MemberStateIsGone(S::kDrained));
  EXPECT_TRUE(MemberStateIsGone(S::kRemoved));
  EXPECT_FALSE(MemberStateIsGone(S::kDown));
  EXPECT_STREQ(MemberStateName(S::kDraining), "draining");
}

}  // namespace
}  // namespace tessera
