#include "tools/export/trained_model.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/model/model_graph.h"
#include "common/model/variable_optimizer.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "partitioners/hash_routing.h"
#include "ps_server/shard_checkpoint.h"
#include "ps_server/shard_store.h"
#include "tools/export/model_file.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = R"pb(
  model_def {
    inputs {
      name: "hashed"
      sparse { max_hotness: 2 }
    }
    inputs {
      name: "fixed"
      sparse { max_hotness: 1 vocab_size: 7 }
    }
    inputs {
      name: "x"
      dense { shape: [ 5 ] }
    }
    label { kind: BINARY }
    layers {
      name: "e1"
      inputs: "hashed"
      embedding_bag { table: "t1" dim: 3 }
    }
    layers {
      name: "e2"
      inputs: "fixed"
      embedding_bag { table: "t2" dim: 2 }
    }
    layers {
      name: "d"
      inputs: [ "e1", "e2", "x" ]
      dense { units: 4 activation: RELU }
    }
    layers {
      name: "logit"
      inputs: "d"
      dense { units: 1 }
    }
    loss { kind: SIGMOID_CROSS_ENTROPY input: "logit" }
  }
  optimizer {
    learning_rate: 0.01
    adam { beta1: 0.9 beta2: 0.999 epsilon: 1e-7 }
  }
  embedding_optimizer {
    learning_rate: 0.1
    adagrad {}
  }
  schedule { seed: 5 }
)pb";

std::string TempRoot(const std::string& name) {
  const std::string root =
      absl::StrCat(::testing::TempDir(), "/", name, "-", getpid());
  std::filesystem::remove_all(root);
  return root;
}

// A variable's definition as the coordinator splits it over `num_ps`
// servers: fixed rows in contiguous ranges, a growing table by id hash.
ShardDef Part(const VariableDef& v, int index, int num_ps) {
  ShardDef def;
  def.set_name(absl::StrCat(v.name, "/part_", index));
  def.set_variable(v.name);
  def.set_index(index);
  def.set_dtype(DT_FLOAT);
  *def.mutable_initializer() = v.initializer;
  for (int64_t d : v.shape) def.mutable_variable_shape()->add_dims(d);
  if (v.sparse && v.shape[0] == 0) {
    def.set_hash_table(true);
    def.set_dim(v.shape[1]);
    def.set_num_shards(num_ps);
    for (int64_t d : v.shape) def.mutable_shape()->add_dims(d);
    return def;
  }
  const int64_t rows = v.shape[0];
  const int64_t begin = rows * index / num_ps;
  const int64_t end = rows * (index + 1) / num_ps;
  def.set_row_offset(begin);
  def.mutable_shape()->add_dims(end - begin);
  for (size_t d = 1; d < v.shape.size(); ++d) {
    def.mutable_shape()->add_dims(v.shape[d]);
  }
  return def;
}

class TrainedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kJob, &job_));
    absl::StatusOr<ModelGraph> graph =
        BuildModelGraph(job_.model_def(), job_.schedule().seed());
    ASSERT_TRUE(graph.ok()) << graph.status();
    graph_ = *std::move(graph);
  }

  // Writes a checkpoint at step 9 of the initial values split over
  // `num_ps` servers, after reading `ids` from the growing table (which
  // creates their rows).
  void WriteCheckpoint(const std::string& root, int num_ps,
                       const std::vector<int64_t>& ids) {
    std::vector<std::unique_ptr<ShardStore>> stores;
    for (int k = 0; k < num_ps; ++k) {
      stores.push_back(std::make_unique<ShardStore>());
      for (const VariableDef& v : graph_.variables) {
        CreateShardsRequest request;
        *request.add_shards() = Part(v, k, num_ps);
        *request.mutable_optimizer() = VariableOptimizer(job_, v);
        CreateShardsResponse response;
        ASSERT_TRUE(stores[k]->Create(request, &response).ok());
        if (v.sparse && v.shape[0] == 0) {
          auto rows = stores[k]->FindRows(request.shards(0).name());
          ASSERT_TRUE(rows.ok());
          std::vector<int64_t> mine;
          for (int64_t id : ids) {
            if (HashShardOf(id, num_ps) == k) mine.push_back(id);
          }
          std::vector<float> out(mine.size() * v.shape[1]);
          (*rows)->Read(mine, out.data());
        }
      }
    }
    CheckpointDir dir(root);
    absl::StatusOr<std::string> folder = dir.Prepare(9);
    ASSERT_TRUE(folder.ok()) << folder.status();
    CheckpointManifest manifest;
    manifest.set_global_step(9);
    manifest.set_num_ps(num_ps);
    *manifest.mutable_job() = job_;
    std::map<std::string, CheckpointVariable> variables;
    for (int k = 0; k < num_ps; ++k) {
      SaveShardsResponse saved;
      ASSERT_TRUE(SaveShardCheckpoint(*stores[k], *folder, k, &saved).ok());
      *manifest.add_files() = saved.file();
      for (const CheckpointVariable& part : saved.variables()) {
        auto [it, fresh] = variables.try_emplace(part.name(), part);
        if (fresh) continue;
        for (const CheckpointShard& s : part.shards()) {
          *it->second.add_shards() = s;
        }
      }
    }
    for (auto& [name, v] : variables) *manifest.add_variables() = v;
    ASSERT_TRUE(dir.Commit(manifest).ok());
  }

  JobConfig job_;
  ModelGraph graph_;
};

TEST_F(TrainedModelTest, GathersEveryShardWhateverTheNumberOfServers) {
  const std::vector<int64_t> ids = {-5, 3, 17, 40, 41, 1000003, 77};
  const std::string one = TempRoot("one_ps"), three = TempRoot("three_ps");
  WriteCheckpoint(one, 1, ids);
  WriteCheckpoint(three, 3, ids);
  absl::StatusOr<TrainedModel> a = LoadTrainedModel(one);
  ASSERT_TRUE(a.ok()) << a.status();
  // A checkpoint folder works as well as its root.
  absl::StatusOr<TrainedModel> b =
      LoadTrainedModel(absl::StrCat(three, "/", CheckpointDirName(9)));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->global_step, 9);
  ASSERT_EQ(a->variables.size(), graph_.variables.size());
  ASSERT_EQ(b->variables.size(), graph_.variables.size());
  for (size_t i = 0; i < a->variables.size(); ++i) {
    const TrainedVariable& x = a->variables[i];
    const TrainedVariable& y = b->variables[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.ids, y.ids);
    EXPECT_EQ(x.values, y.values);
    EXPECT_FALSE(x.values.empty());
  }
  const TrainedVariable* t1 = b->Find("t1");
  ASSERT_NE(t1, nullptr);
  EXPECT_THAT(t1->ids, ::testing::ElementsAre(-5, 3, 17, 40, 41, 77, 1000003));
  EXPECT_EQ(t1->shape, (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(b->Find("t2")->vocab_size, 7);
  EXPECT_EQ(b->Find("d/kernel")->shape, (std::vector<int64_t>{3 + 2 + 5, 4}));
}

TEST_F(TrainedModelTest, MissingOrDamagedCheckpointGivesRestoresErrors) {
  const std::string root = TempRoot("damaged");
  absl::StatusOr<TrainedModel> none = LoadTrainedModel(root);
  EXPECT_EQ(none.status(), CheckpointDir(root).LatestValid().status());
  EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();

  WriteCheckpoint(root, 2, {1, 2, 3});
  const std::string file =
      absl::StrCat(root, "/", CheckpointDirName(9), "/ps-1.shards");
  std::FILE* f = std::fopen(file.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, 40, SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, 40, SEEK_SET);
  std::fputc(c ^ 0x5a, f);
  std::fclose(f);
  absl::StatusOr<TrainedModel> damaged = LoadTrainedModel(root);
  EXPECT_EQ(damaged.status(), CheckpointDir(root).LatestValid().status());
  absl::StatusOr<TrainedModel> named =
      LoadTrainedModel(absl::StrCat(root, "/", CheckpointDirName(9)));
  EXPECT_TRUE(absl::IsDataLoss(named.status())) << named.status();
  EXPECT_THAT(named.status().message(), HasSubstr("ps-1.shards"));
}

TEST_F(TrainedModelTest, ModelFileHoldsTheWholeModel) {
  const std::string root = TempRoot("for_file");
  WriteCheckpoint(root, 2, {4, 9, -1});
  absl::StatusOr<TrainedModel> a = LoadTrainedModel(root);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::string file = absl::StrCat(root, "/model.tessera");
  ASSERT_TRUE(WriteModelFile(*a, file).ok());
  absl::StatusOr<TrainedModel> b = LoadTrainedModel(file);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->global_step, 9);
  ASSERT_EQ(a->variables.size(), b->variables.size());
  for (size_t i = 0; i < a->variables.size(); ++i) {
    SCOPED_TRACE(a->variables[i].name);
    EXPECT_EQ(a->variables[i].name, b->variables[i].name);
    EXPECT_EQ(a->variables[i].shape, b->variables[i].shape);
    EXPECT_EQ(a->variables[i].ids, b->variables[i].ids);
    EXPECT_EQ(a->variables[i].values, b->variables[i].values);
    EXPECT_EQ(a->variables[i].vocab_size, b->variables[i].vocab_size);
  }
  // A checkpoint shard file is a checkpoint file but no model.
  absl::StatusOr<TrainedModel> shard = LoadTrainedModel(
      absl::StrCat(root, "/", CheckpointDirName(9), "/ps-0.shards"));
  EXPECT_TRUE(absl::IsInvalidArgument(shard.status())) << shard.status();
}

}  // namespace
}  // namespace tessera
