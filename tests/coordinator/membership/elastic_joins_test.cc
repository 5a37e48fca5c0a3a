#include "coordinator/membership/elastic_joins.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/training_mode.h"
#include "coordinator/membership/membership.h"
#include "coordinator/worker_task.h"
#include "gtest/gtest.h"
#include "tests/coordinator/membership/fake_seats.h"

namespace tessera {
namespace {

using membership_testing::AddressOnly;
using membership_testing::FakeSeats;

// The refusals come before the membership is asked to change anything.
ElasticJoins Joins(Membership* membership, const std::string& mode,
                   bool can_connect, bool reforms_ring = false) {
  ElasticJoinsOptions options;
  options.mode = *ParseTrainingMode(mode);
  options.reforms_ring = reforms_ring;
  if (can_connect) {
    options.connect_worker = [](const std::string&, int) {
      return std::unique_ptr<WorkerTask>();
    };
  }
  return ElasticJoins(
      membership,
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
  // With a ring that can be re-formed (a checkpoint folder for the
  // replica's copy) mirrored and hybrid jobs take joins and drains: the
  // mode no longer refuses them (the job not training yet, or its
  // minimum of workers, still does).
  for (const char* mode : {"mirrored", "hybrid:sync"}) {
    ElasticJoins reforming = Joins(&membership, mode, true, true);
    EXPECT_EQ(reforming.AddWorker("h:2").status().code(),
              absl::StatusCode::kUnavailable)
        << mode;  // not open yet: retried
    reforming.Open();
    absl::Status drain = reforming.DrainWorker("0").status();
    EXPECT_EQ(drain.code(), absl::StatusCode::kFailedPrecondition) << mode;
    EXPECT_EQ(drain.message().find("mode "), std::string::npos) << drain;
    EXPECT_NE(drain.message().find("--min_workers"), std::string::npos)
        << drain;
    reforming.Close();
  }
  ElasticJoins unreachable = Joins(&membership, "async", false);
  unreachable.Open();
  EXPECT_EQ(unreachable.AddWorker("h:2").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ElasticJoinsTest, MemberChangesGoToTheTableAndADrainedWorkerIsToldToExit) {
  AddressOnly a("h:1"), b("h:2");
  FakeSeats seats(2);
  Membership membership({&a, &b}, &seats, 1);
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  RecordMemberChange(&membership, out, 0, MemberState::kDown, "killed");
  EXPECT_EQ(membership.state(0), MemberState::kDown);
  RecordMemberChange(&membership, out, 0, MemberState::kActive, "back");
  EXPECT_EQ(membership.state(0), MemberState::kActive);
  // A drain is the membership's to make; the coordinator tells the rest.
  RecordMemberChange(&membership, out, 1, MemberState::kDraining, "asked");
  EXPECT_EQ(membership.state(1), MemberState::kActive);
  ASSERT_TRUE(membership.Drain(1).ok());
  RecordMemberChange(&membership, out, 1, MemberState::kDrained, "done");
  EXPECT_EQ(membership.state(1), MemberState::kDrained);
  EXPECT_EQ(b.shutdowns, 1);
  EXPECT_EQ(a.shutdowns, 0);
  std::fclose(out);
}

}  // namespace
}  // namespace tessera
