#include "coordinator/membership/membership.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/worker_task.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

// A worker that is only an address.
class AddressOnly : public WorkerTask {
 public:
  explicit AddressOnly(std::string address) : address_(std::move(address)) {}
  const std::string& address() const override { return address_; }
  absl::Status Configure(const WorkerConfig&, ConfigureResponse*) override {
    return absl::OkStatus();
  }
  absl::Status Evaluate(const EvaluateRequest&, EvaluateResponse*) override {
    return absl::OkStatus();
  }
  absl::Status Health(HealthResponse*, double) override {
    return absl::OkStatus();
  }
  absl::Status Shutdown(const std::string&) override {
    return absl::OkStatus();
  }
  absl::Status RunStep(const StepRequest&, StepResponse*) override {
    return absl::OkStatus();
  }
  WorkerHealth Probe() override { return WorkerHealth::kReady; }
  absl::Status Restore() override { return absl::OkStatus(); }

 private:
  std::string address_;
};

TEST(MembershipTest, KeepsEveryWorkersStateAndTheHistory) {
  AddressOnly a("h:1"), b("h:2"), c("h:3");
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Membership m({&a, &b}, t0);
  m.Add(2, &c, t0 + absl::Seconds(5));
  EXPECT_EQ(m.state(2), MemberState::kJoining);
  EXPECT_EQ(m.Active(), (std::vector<WorkerTask*>{&a, &b}));
  m.Set(2, MemberState::kActive, "serves shard 0", t0 + absl::Seconds(6));
  m.Set(1, MemberState::kDraining, "asked", t0 + absl::Seconds(7));
  m.Set(1, MemberState::kDrained, "done", t0 + absl::Seconds(8));
  m.Set(0, MemberState::kDown, "killed", t0 + absl::Seconds(9));
  m.Set(0, MemberState::kRemoved, "not back", t0 + absl::Seconds(10));
  // Final: news that arrives late changes nothing.
  m.Set(1, MemberState::kDraining, "told late", t0 + absl::Seconds(11));
  EXPECT_EQ(m.Active(), (std::vector<WorkerTask*>{&c}));
  EXPECT_EQ(m.Present(), (std::vector<WorkerTask*>{&c}));
  EXPECT_EQ(m.IndexOf("h:2"), 1);
  EXPECT_EQ(m.IndexOf("h:9"), -1);

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
  EXPECT_EQ(status.membership(7).worker(), 0);
  EXPECT_EQ(status.membership(7).state(), "removed");
  EXPECT_EQ(status.membership(7).note(), "not back");
}

TEST(MembershipTest, IgnoresAChangeTheStateMachineDoesNotAllow) {
  AddressOnly a("h:1"), b("h:2");
  Membership m({&a});
  m.Add(1, &b);
  m.Set(1, MemberState::kDraining, "asked");  // still joining
  EXPECT_EQ(m.state(1), MemberState::kJoining);
  m.Set(0, MemberState::kDraining, "asked");
  m.Set(0, MemberState::kActive, "back");  // a draining worker takes no step
  EXPECT_EQ(m.state(0), MemberState::kDraining);
  JobStatus status;
  m.Fill(&status);
  EXPECT_EQ(status.membership_size(), 3);  // started, asked to join, draining
}

TEST(MembershipTest, IgnoresAnUnknownWorkerAndAnIndexOutOfTurn) {
  AddressOnly a("h:1"), b("h:2");
  Membership m({&a});
  m.Set(5, MemberState::kDown, "who?");
  m.Add(3, &b);  // not the next index
  EXPECT_EQ(m.size(), 1);
  JobStatus status;
  m.Fill(&status);
  EXPECT_EQ(status.membership_size(), 1);
}

}  // namespace
}  // namespace tessera
