#include "coordinator/schedule/ring_changes.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(RingChangesTest, AJoinOrRemovalChangesTheRingUntilTaken) {
  RingChanges ring;
  EXPECT_FALSE(ring.changed());
  ring.MarkChanged();
  EXPECT_TRUE(ring.changed());
  EXPECT_THAT(ring.Take(), IsEmpty());
  EXPECT_FALSE(ring.changed());
}

TEST(RingChangesTest, DrainingMembersLeaveAtTheNextTakeOnly) {
  RingChanges ring;
  ring.Drain(2);
  ring.Drain(1);
  EXPECT_TRUE(ring.changed());
  EXPECT_THAT(ring.Take(), ElementsAre(1, 2));
  EXPECT_FALSE(ring.changed());
  EXPECT_THAT(ring.Take(), IsEmpty());
}

}  // namespace
}  // namespace tessera
