#include "coordinator/membership/membership.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/worker_task.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/membership/fake_seats.h"

namespace tessera {
namespace {

using membership_testing::AddressOnly;
using membership_testing::FakeSeats;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MembershipTest, KeepsEveryWorkersStateAndTheHistory) {
  AddressOnly a("h:1"), b("h:2");
  auto c = std::make_unique<AddressOnly>("h:3");
  AddressOnly* c_raw = c.get();
  FakeSeats seats(2);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Membership m({&a, &b}, &seats, 1, t0);
  ASSERT_EQ(*m.Join(std::move(c), t0 + absl::Seconds(5)), 2);
  EXPECT_EQ(m.state(2), MemberState::kJoining);
  EXPECT_EQ(m.task(2), c_raw);
  EXPECT_EQ(m.Active(), (std::vector<WorkerTask*>{&a, &b}));
  ASSERT_TRUE(m.Activate(2, 0, t0 + absl::Seconds(6)).ok());
  ASSERT_TRUE(m.Drain(1, t0 + absl::Seconds(7)).ok());
  m.Set(1, MemberState::kDrained, "done", t0 + absl::Seconds(8));
  m.Set(0, MemberState::kDown, "killed", t0 + absl::Seconds(9));
  m.Set(0, MemberState::kRemoved, "not back", t0 + absl::Seconds(10));
  // Final: news that arrives late changes nothing.
  m.Set(1, MemberState::kDown, "told late", t0 + absl::Seconds(11));
  EXPECT_EQ(m.Active(), (std::vector<WorkerTask*>{c_raw}));
  EXPECT_EQ(m.Present(), (std::vector<WorkerTask*>{c_raw}));
  EXPECT_EQ(m.IndexOf("h:2"), 1);
  EXPECT_EQ(m.IndexOf("h:9"), -1);
  EXPECT_THAT(seats.calls,
              ElementsAre("add 2", "serve 2 0", "leave 1 draining"));

  JobStatus status;
  for (int w = 0; w < 3; ++w) status.add_workers()->set_index(w);
  m.Fill(&status);
  EXPECT_EQ(status.workers(0).state(), "removed");
  EXPECT_EQ(status.workers(0).state_since_ms(), 1010000);
  EXPECT_EQ(status.workers(1).state(), "drained");
  EXPECT_EQ(status.workers(2).state(), "active");
  // Two started, one asked to join, then five changes, in order.
  ASSERT_EQ(status.membership_size(), 8);
  EXPECT_EQ(status.membership(2).state(), "joining");
  EXPECT_EQ(status.membership(2).address(), "h:3");
  EXPECT_EQ(status.membership(3).note(), "serves shard 0");
  EXPECT_EQ(status.membership(4).state(), "draining");
  EXPECT_EQ(status.membership(7).worker(), 0);
  EXPECT_EQ(status.membership(7).state(), "removed");
  EXPECT_EQ(status.membership(7).note(), "not back");
}

TEST(MembershipTest, IgnoresAChangeTheStateMachineDoesNotAllow) {
  AddressOnly a("h:1"), b("h:2");
  FakeSeats seats(2);
  Membership m({&a, &b}, &seats, 1);
  ASSERT_TRUE(m.Join(std::make_unique<AddressOnly>("h:3")).ok());
  m.Set(2, MemberState::kActive, "told");  // joins are Activate's
  EXPECT_EQ(m.state(2), MemberState::kJoining);
  m.Set(0, MemberState::kDraining, "told");  // drains are Drain's
  EXPECT_EQ(m.state(0), MemberState::kActive);
  ASSERT_TRUE(m.Drain(0).ok());
  m.Set(0, MemberState::kActive, "back");  // a draining worker takes no step
  EXPECT_EQ(m.state(0), MemberState::kDraining);
  JobStatus status;
  m.Fill(&status);
  // Two started, one asked to join, one draining.
  EXPECT_EQ(status.membership_size(), 4);
}

TEST(MembershipTest, IgnoresAnUnknownWorkerAndTakesNoJoinWithoutSeats) {
  AddressOnly a("h:1");
  Membership m({&a});
  m.Set(5, MemberState::kDown, "who?");
  EXPECT_EQ(m.Join(std::make_unique<AddressOnly>("h:2")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.size(), 1);
  JobStatus status;
  m.Fill(&status);
  EXPECT_EQ(status.membership_size(), 1);
}

TEST(MembershipTest, ActivateTakesOnlyAJoiningWorkerAndAShardOfTheJob) {
  AddressOnly a("h:1");
  FakeSeats seats(1);
  Membership m({&a}, &seats, 1);
  ASSERT_TRUE(m.Join(std::make_unique<AddressOnly>("h:2")).ok());
  EXPECT_EQ(m.QueueForNewWorker(), 1);
  EXPECT_EQ(m.Activate(0, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.Activate(1, 2).code(), absl::StatusCode::kInvalidArgument);
  // The seats' refusal (the job recovers) leaves it joining: ask again.
  seats.serve = absl::UnavailableError("recovering");
  EXPECT_EQ(m.Activate(1, 1).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(m.state(1), MemberState::kJoining);
  seats.serve = absl::OkStatus();
  ASSERT_TRUE(m.Activate(1, 1).ok());
  EXPECT_EQ(m.state(1), MemberState::kActive);
}

TEST(MembershipTest, AForgottenWorkerLeavesItsSeatAndCannotBeActivated) {
  AddressOnly a("h:1");
  FakeSeats seats(1);
  Membership m({&a}, &seats, 1);
  ASSERT_TRUE(m.Join(std::make_unique<AddressOnly>("h:2")).ok());
  m.Forget(1, "could not join: no answer");
  EXPECT_EQ(m.state(1), MemberState::kRemoved);
  m.Forget(0, "not joining");  // nothing
  EXPECT_EQ(m.state(0), MemberState::kActive);
  EXPECT_EQ(m.Activate(1, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(seats.calls, ElementsAre("add 1", "leave 1 removed"));
}

TEST(MembershipTest, DrainSaysWhyItIsRefused) {
  AddressOnly a("h:1"), b("h:2"), c("h:3");
  FakeSeats seats(3);
  Membership m({&a, &b, &c}, &seats, 2);
  EXPECT_EQ(m.Drain(7).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(m.Join(std::make_unique<AddressOnly>("h:4")).ok());
  EXPECT_THAT(m.Drain(3).message(), HasSubstr("still joining"));
  ASSERT_TRUE(m.Drain(2).ok());
  EXPECT_THAT(m.Drain(2).message(), HasSubstr("already draining"));
  // Two active workers left, and the floor is two.
  const absl::Status floor = m.Drain(0);
  EXPECT_EQ(floor.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(floor.message(), HasSubstr("--min_workers"));
  m.Set(2, MemberState::kDrained, "done");
  EXPECT_THAT(m.Drain(2).message(), HasSubstr("already left"));
}

// A down worker shows as down and keeps the state it comes back to: one
// that was active may drain, one that was draining is already draining.
TEST(MembershipTest, ADownWorkerKeepsTheStateItComesBackTo) {
  AddressOnly a("h:1"), b("h:2"), c("h:3");
  FakeSeats seats(3);
  Membership m({&a, &b, &c}, &seats, 1);
  m.Set(0, MemberState::kDown, "killed");
  EXPECT_EQ(m.state(0), MemberState::kDown);
  EXPECT_EQ(m.Active(), (std::vector<WorkerTask*>{&b, &c}));
  m.Set(0, MemberState::kActive, "back");
  EXPECT_EQ(m.state(0), MemberState::kActive);
  ASSERT_TRUE(m.Drain(1).ok());
  m.Set(1, MemberState::kDown, "killed while draining");
  EXPECT_THAT(m.Drain(1).message(), HasSubstr("already draining"));
  m.Set(1, MemberState::kDrained, "its steps are over");
  EXPECT_EQ(m.state(1), MemberState::kDrained);
  m.Set(2, MemberState::kDown, "killed");
  ASSERT_TRUE(m.Drain(2).ok());
  EXPECT_EQ(m.state(2), MemberState::kDraining);
}

TEST(MembershipTest, TheSeatsRefusalOfADrainChangesNothing) {
  AddressOnly a("h:1"), b("h:2");
  FakeSeats seats(2);
  Membership m({&a, &b}, &seats, 1);
  seats.leave = absl::FailedPreconditionError("worker 1 has already left");
  EXPECT_EQ(m.Drain(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.state(1), MemberState::kActive);
}

}  // namespace
}  // namespace tessera
