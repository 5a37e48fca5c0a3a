#include "coordinator/control/status_text.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Issue #33, defect 11: before any evaluation tessera_ctl status showed
// "last test accuracy 0.0000", a figure nobody measured.
TEST(StatusTextTest, FiguresNotMeasuredYetReadNoneYet) {
  JobStatus status;
  status.set_state("training");
  status.set_epoch(1);
  status.set_epochs(3);
  const std::string before = FormatJobStatus(status);
  EXPECT_THAT(before, HasSubstr("last loss none yet"));
  EXPECT_THAT(before, HasSubstr("last test accuracy none yet (no evaluation)"));
  EXPECT_THAT(before, Not(HasSubstr("0.0000")));

  status.set_steps_done(10);
  status.set_steps_scheduled(12);
  status.set_last_loss(0.5f);
  status.set_evaluations(1);
  status.set_last_test_accuracy(0.0f);  // measured: a model that is all wrong
  const std::string after = FormatJobStatus(status);
  EXPECT_THAT(after, HasSubstr("10 steps done, 12 scheduled"));
  EXPECT_THAT(after, HasSubstr("last loss 0.5000"));
  EXPECT_THAT(after, HasSubstr("last test accuracy 0.0000"));
}

// Issue #42: "4794 steps done" of a sync job read as global steps; a
// lockstep job's count says it counts worker steps, and the global steps.
TEST(StatusTextTest, LockstepCountsSayWorkerAndGlobalSteps) {
  JobStatus status;
  status.set_lockstep(true);
  status.set_steps_done(392);
  status.set_global_steps_done(196);
  status.set_steps_scheduled(394);
  EXPECT_THAT(FormatJobStatus(status),
              HasSubstr("392 worker steps done (196 global steps), 394 "
                        "scheduled"));
}

// Issue #42: a regression's last test figure is its loss (MSE); it has no
// accuracy, which read 0.0000.
TEST(StatusTextTest, ARegressionShowsItsTestLossNotAnAccuracy) {
  JobStatus status;
  status.set_regression(true);
  status.set_evaluations(1);
  status.set_last_test_loss(0.25f);
  const std::string text = FormatJobStatus(status);
  EXPECT_THAT(text, HasSubstr("last test loss (MSE) 0.2500"));
  EXPECT_THAT(text, Not(HasSubstr("accuracy")));
}

// Issue #42: a server's allocated bytes (growing tables reserve room for
// the rows they expect) read as its usage.
TEST(StatusTextTest, AServerShowsTheBytesUsedOfThoseAllocated) {
  JobStatus status;
  ServerState* p = status.add_servers();
  p->set_up(true);
  p->set_resident_bytes(113'900'000);
  p->set_used_bytes(2'300'000);
  EXPECT_THAT(FormatJobStatus(status),
              HasSubstr("2.3 MB used of 113.9 MB allocated"));
}

TEST(StatusTextTest, ListsWorkersAndServers) {
  JobStatus status;
  WorkerState* w = status.add_workers();
  w->set_index(1);
  w->set_address("127.0.0.1:5");
  w->set_down(true);
  ServerState* p = status.add_servers();
  p->set_index(0);
  p->set_address("127.0.0.1:6");
  p->set_error("connection refused");
  const std::string text = FormatJobStatus(status);
  EXPECT_THAT(text, HasSubstr("worker 1 127.0.0.1:5"));
  EXPECT_THAT(text, HasSubstr("DOWN"));
  EXPECT_THAT(
      text,
      HasSubstr("ps 0     127.0.0.1:6           DOWN: connection refused"));
}

TEST(StatusTextTest, ShowsEachWorkersStateAndTheMembershipHistory) {
  JobStatus status;
  WorkerState* w = status.add_workers();
  w->set_index(2);
  w->set_address("127.0.0.1:7");
  w->set_state("draining");
  w->set_state_since_ms(3723004);  // 01:02:03.004
  MembershipChange* c = status.add_membership();
  c->set_worker(2);
  c->set_address("127.0.0.1:7");
  c->set_state("joining");
  c->set_time_ms(3600000);
  c->set_note("asked to join");
  status.set_min_workers(2);
  const std::string text = FormatJobStatus(status);
  EXPECT_THAT(text, HasSubstr("draining since 01:02:03.004"));
  EXPECT_THAT(text, HasSubstr("membership (at least 2 workers):"));
  EXPECT_THAT(text, HasSubstr("01:00:00.000 worker 2 127.0.0.1:7"));
  EXPECT_THAT(text, HasSubstr("joining  asked to join"));
}

// Issue #43: each table's precision, optimizer and bytes per row.
TEST(StatusTextTest, TablesShowPrecisionOptimizerAndBytes) {
  JobStatus status;
  TableMemory* t = status.add_tables();
  t->set_name("table_C1");
  t->set_precision("fp16");
  t->set_optimizer("rowwise_adagrad");
  t->set_slot_floats_per_row(1);
  t->set_bytes_per_row(36);
  t->add_bytes_per_server(18000000);
  t->add_bytes_per_server(18000000);
  EXPECT_THAT(FormatJobStatus(status),
              HasSubstr("table table_C1         fp16 rowwise_adagrad, 1 slot "
                        "float/row, 36 B/row, MB per ps: 18.0 18.0"));
}

}  // namespace
}  // namespace tessera
