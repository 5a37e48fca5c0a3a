#include "coordinator/replica_losses.h"

#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ReplicaLossesTest, TheFirstLossAndTheRestartedUntilTaken) {
  ReplicaLosses losses;
  EXPECT_FALSE(losses.Take());
  EXPECT_TRUE(losses.Lost());
  EXPECT_FALSE(losses.Lost());  // the same round: told once
  losses.Restarted(2);
  losses.Restarted(0);
  losses.Restarted(2);
  EXPECT_EQ(losses.restarted(), (std::vector<int>{0, 2}));
  EXPECT_TRUE(losses.Take());
  EXPECT_TRUE(losses.restarted().empty());
  EXPECT_FALSE(losses.Take());
  EXPECT_TRUE(losses.Lost());
}

}  // namespace
}  // namespace tessera
