#include "coordinator/elastic_joins.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/training_mode.h"
#include "coordinator/membership/membership.h"
#include "coordinator/worker_task.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

// A worker that is only an address and counts the shutdowns it is told.
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
    ++shutdowns;
    return absl::OkStatus();
  }
  absl::Status RunStep(const StepRequest&, StepResponse*) override {
    return absl::OkStatus();
  }
  WorkerHealth Probe() override { return WorkerHealth::kReady; }
  absl::Status Restore() override { return absl::OkStatus(); }

  int shutdowns = 0;

 private:
  std::string address_;
};

// The refusals come before the coordinator is asked anything: no
// coordinator is needed to check them.
ElasticJoins Joins(Membership* membership, const std::string& mode,
                   bool can_connect) {
  ElasticJoinsOptions options;
  options.mode = *ParseTrainingMode(mode);
  if (can_connect) {
    options.connect_worker = [](const std::string&, int) {
      return std::unique_ptr<WorkerTask>();
    };
  }
  return ElasticJoins(
      /*coordinator=*/nullptr, membership,
      [](int, int) { return absl::StatusOr<WorkerConfig>(WorkerConfig()); },
      stdout, std::move(options));
}

TEST(ElasticJoinsTest, AJoinBeforeTheEpochsIsRetriedAndAfterThemRefused) {
  AddressOnly a("h:1");
  Membership membership({&a});
  ElasticJoins joins = Joins(&membership, "async", true);
  EXPECT_EQ(joins.AddWorker("h:2").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(joins.DrainWorker("0").status().code(),
            absl::StatusCode::kFailedPrecondition);
  joins.Open();
  EXPECT_EQ(joins.DrainWorker("h:9").status().code(),
            absl::StatusCode::kNotFound);
  joins.Close();
  EXPECT_EQ(joins.AddWorker("h:2").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(joins.DrainWorker("0").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ElasticJoinsTest,
     ModesWithReplicasAndCoordinatorsThatCannotConnectRefuse) {
  AddressOnly a("h:1");
  Membership membership({&a});
  ElasticJoins mirrored = Joins(&membership, "mirrored", true);
  mirrored.Open();
  absl::Status join = mirrored.AddWorker("h:2").status();
  EXPECT_EQ(join.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(join.message().find("mode mirrored"), std::string::npos) << join;
  EXPECT_EQ(mirrored.DrainWorker("0").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ElasticJoins unreachable = Joins(&membership, "async", false);
  unreachable.Open();
  EXPECT_EQ(unreachable.AddWorker("h:2").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ElasticJoinsTest, MemberChangesGoToTheTableAndADrainedWorkerIsToldToExit) {
  AddressOnly a("h:1"), b("h:2");
  Membership membership({&a, &b});
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  RecordMemberChange(&membership, out, 0, MemberState::kDown, "killed");
  EXPECT_EQ(membership.state(0), MemberState::kDown);
  RecordMemberChange(&membership, out, 0, MemberState::kActive, "back");
  EXPECT_EQ(membership.state(0), MemberState::kActive);
  RecordMemberChange(&membership, out, 1, MemberState::kDraining, "asked");
  RecordMemberChange(&membership, out, 1, MemberState::kDrained, "done");
  EXPECT_EQ(membership.state(1), MemberState::kDrained);
  EXPECT_EQ(b.shutdowns, 1);
  EXPECT_EQ(a.shutdowns, 0);
  std::fclose(out);
}

}  // namespace
}  // namespace tessera
