// A StreamPlan's steps served by workers' StreamExamples, with steps lost
// to crashes and re-run elsewhere and a worker restarted mid-epoch: every
// example of every epoch is trained exactly once, as the coordinator's
// fault handling promises for data held in memory.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/data_plan.h"
#include "data/stream/file_assignment.h"
#include "data/stream/stream_examples.h"
#include "gtest/gtest.h"
#include "tests/data/stream/stream_test_files.h"

namespace tessera {
namespace {

class StreamPlanExactlyOnceTest : public stream_test::StreamFileTest {};

TEST_F(StreamPlanExactlyOnceTest, ReRunsAndRestartsTrainEachExampleOnce) {
  constexpr int kWorkers = 3;
  // Five files (two gzip) of 53 examples.
  const std::vector<int64_t> sizes = {12, 7, 15, 9, 10};
  int64_t id = 0;
  for (size_t f = 0; f < sizes.size(); ++f) {
    WriteExamples(absl::StrCat("part-", f), id, sizes[f], f % 2 == 1);
    id += sizes[f];
  }
  DataConfig data;
  data.set_format("tfrecord");
  data.add_train_files(Path("part-*"));
  data.add_test_files(Path("part-0"));
  data.set_label_feature("y");
  data.set_shuffle_buffer(6);
  ModelDef model;
  InputDef* x = model.add_inputs();
  x->set_name("x");
  x->mutable_dense()->add_shape(3);
  InputDef* cat = model.add_inputs();
  cat->set_name("cat");
  cat->mutable_sparse()->set_max_hotness(2);
  model.mutable_label()->set_kind(LabelDef::BINARY);

  absl::StatusOr<StreamedDataSet> set = AssignStreamedData(data, kWorkers);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->train_records, 53);
  std::vector<int64_t> shard_sizes;
  for (const StreamShard& s : set->train_shards) {
    shard_sizes.push_back(ShardSize(s));
  }
  auto start_worker = [&] {
    auto w = StreamExamples::Create(data, model, 11, set->train_shards,
                                    set->test_files);
    EXPECT_TRUE(w.ok()) << w.status();
    return *std::move(w);
  };
  std::vector<std::unique_ptr<StreamExamples>> workers;
  for (int w = 0; w < kWorkers; ++w) workers.push_back(start_worker());

  absl::StatusOr<StreamPlan> plan = StreamPlan::Create(shard_sizes, 4, 0);
  ASSERT_TRUE(plan.ok());
  int64_t step_number = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::map<int64_t, int> trained;
    const std::vector<PlannedStreamStep> steps = plan->NextEpoch();
    for (size_t i = 0; i < steps.size(); ++i, ++step_number) {
      const PlannedStreamStep& s = steps[i];
      int worker = s.shard;
      HostBatch batch;
      int64_t bad = 0;
      std::string why;
      if (step_number % 5 == 2) {
        // The worker crashes after reading the step: its result is lost,
        // and it comes back with nothing open.
        ASSERT_TRUE(
            workers[worker]
                ->Take(s.shard, s.pass, s.first, s.count, &batch, &bad, &why)
                .ok());
        workers[worker] = start_worker();
        worker = (worker + 1) % kWorkers;  // the re-run goes elsewhere
      }
      absl::Status st = workers[worker]->Take(s.shard, s.pass, s.first, s.count,
                                              &batch, &bad, &why);
      ASSERT_TRUE(st.ok()) << st;
      ASSERT_EQ(batch.size, s.count);
      for (int64_t e = 0; e < batch.size; ++e) {
        ++trained[static_cast<int64_t>(batch.dense[0][3 * e])];
      }
    }
    ASSERT_EQ(trained.size(), 53u) << "epoch " << epoch;
    for (const auto& [example, times] : trained) {
      EXPECT_EQ(times, 1) << "example " << example << ", epoch " << epoch;
    }
  }
}

}  // namespace
}  // namespace tessera
