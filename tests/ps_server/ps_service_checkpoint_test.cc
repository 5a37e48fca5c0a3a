// SaveShards and RestoreShards over real gRPC on loopback, through the
// checkpoint directory protocol the coordinator follows (Prepare, save on
// every server, Commit, LatestValid, restore), and the job token every
// ParameterServer call must carry.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_dir.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/ps_service.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::AdamConfig;
using ps_test::GlorotInit;
using ps_test::MakeShardDef;
using ps_test::TestPsServer;
using ::testing::HasSubstr;
using testing_util::ScratchDir;

constexpr int64_t kRows = 300;
constexpr int64_t kCols = 7;
constexpr int64_t kDim = 4;

CreateShardsRequest Shards() {
  CreateShardsRequest request;
  *request.add_shards() =
      MakeShardDef("w", 0, {kRows, kCols}, 0, 150, GlorotInit(kRows, kCols, 1));
  *request.add_shards() = MakeShardDef("w", 1, {kRows, kCols}, 150, 150,
                                       GlorotInit(kRows, kCols, 1));
  ShardDef table =
      MakeShardDef("emb", 0, {1000, kDim}, 0, 1000, GlorotInit(4, 4, 2));
  table.set_hash_table(true);
  table.set_dim(kDim);
  table.set_num_shards(1);
  *request.add_shards() = table;
  *request.mutable_optimizer() = AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f);
  return request;
}

std::vector<float> Grad(int64_t n, float scale) {
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = scale * static_cast<float>(i % 13 - 6);
  return g;
}

// Pushes one dense gradient of both shards and one row gradient.
void Push(PsClient& client, float scale) {
  const std::vector<float> g = Grad(150 * kCols, scale);
  const std::vector<std::string> names = {"w/part_0", "w/part_1"};
  const std::vector<absl::Span<const float>> grads = {g, g};
  PushResponse response;
  ASSERT_TRUE(client.PushDense(names, grads, {}, &response).ok());
  const std::vector<int64_t> ids = {3, 17, -5, 1 << 30};
  ASSERT_TRUE(client
                  .PushRows("emb/part_0", ids, kDim,
                            Grad(ids.size() * kDim, scale), &response)
                  .ok());
}

struct Pulled {
  std::vector<float> dense;
  std::vector<int64_t> versions;
  std::vector<float> rows;
};

Pulled Pull(PsClient& client) {
  Pulled p;
  p.dense.resize(2 * 150 * kCols);
  const std::vector<std::string> names = {"w/part_0", "w/part_1"};
  const std::vector<absl::Span<float>> out = {
      absl::MakeSpan(p.dense.data(), 150 * kCols),
      absl::MakeSpan(p.dense.data() + 150 * kCols, 150 * kCols)};
  EXPECT_TRUE(client.PullDense(names, out, &p.versions).ok());
  const std::vector<int64_t> ids = {3, 17, -5, 1 << 30};
  p.rows.resize(ids.size() * kDim);
  EXPECT_TRUE(
      client.PullRows("emb/part_0", ids, kDim, absl::MakeSpan(p.rows)).ok());
  return p;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PsServiceCheckpointTest, SaveThenRestoreOnAFreshServer) {
  ScratchDir root;
  TestPsServer a;
  ASSERT_TRUE(a.started());
  std::unique_ptr<PsClient> client_a = a.NewClient();
  CreateShardsResponse created;
  ASSERT_TRUE(client_a->CreateShards(Shards(), &created).ok());
  for (int step = 0; step < 3; ++step) Push(*client_a, 0.1f * (step + 1));

  // The coordinator's side of a checkpoint.
  const CheckpointDir checkpoints(root.path());
  absl::StatusOr<std::string> dir = checkpoints.Prepare(120);
  ASSERT_TRUE(dir.ok()) << dir.status();
  SaveShardsRequest save;
  save.set_directory(*dir);
  save.set_ps_index(0);
  save.set_global_step(120);
  SaveShardsResponse saved;
  absl::Status s = client_a->SaveShards(save, &saved);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(saved.file().name(), "ps-0.shards");
  EXPECT_GT(saved.file().size_bytes(), 2 * 150 * kCols * 3 * 4);
  ASSERT_EQ(saved.variables_size(), 2);  // "emb" and "w", in name order
  EXPECT_EQ(saved.variables(0).kind(), "hash");
  EXPECT_EQ(saved.variables(1).kind(), "dense");
  EXPECT_EQ(saved.variables(1).shards_size(), 2);
  EXPECT_THAT(saved.variables(1).slots(), ::testing::ElementsAre("m", "v"));
  CheckpointManifest manifest;
  manifest.set_global_step(120);
  manifest.set_num_ps(1);
  *manifest.add_files() = saved.file();
  *manifest.mutable_variables() = saved.variables();
  ASSERT_TRUE(checkpoints.Commit(manifest).ok());
  absl::StatusOr<ValidCheckpoint> latest = checkpoints.LatestValid();
  ASSERT_TRUE(latest.ok()) << latest.status();

  TestPsServer b;
  ASSERT_TRUE(b.started());
  std::unique_ptr<PsClient> client_b = b.NewClient();
  ASSERT_TRUE(client_b->CreateShards(Shards(), &created).ok());
  RestoreShardsRequest restore;
  restore.set_directory(latest->path);
  *restore.mutable_manifest() = latest->manifest;
  RestoreShardsResponse restored;
  s = client_b->RestoreShards(restore, &restored);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(restored.shards_restored(), 3);
  EXPECT_EQ(restored.rows_restored(), kRows + 4);

  Pulled pa = Pull(*client_a);
  Pulled pb = Pull(*client_b);
  EXPECT_TRUE(SameBits(pa.dense, pb.dense));
  EXPECT_EQ(pa.versions, pb.versions);
  EXPECT_TRUE(SameBits(pa.rows, pb.rows));
  // Training goes on identically (Adam's t came back too).
  Push(*client_a, -0.3f);
  Push(*client_b, -0.3f);
  pa = Pull(*client_a);
  pb = Pull(*client_b);
  EXPECT_TRUE(SameBits(pa.dense, pb.dense));
  EXPECT_TRUE(SameBits(pa.rows, pb.rows));
}

TEST(PsServiceCheckpointTest, RestoreErrorsComeBackNamed) {
  ScratchDir root;
  TestPsServer server;
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client = server.NewClient();
  CreateShardsResponse created;
  ASSERT_TRUE(client->CreateShards(Shards(), &created).ok());
  RestoreShardsRequest restore;
  restore.set_directory(root.path());
  RestoreShardsResponse restored;
  absl::Status s = client->RestoreShards(restore, &restored);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("no variable emb"));

  SaveShardsRequest save;
  save.set_directory(root.path() + "/missing");
  SaveShardsResponse saved;
  s = client->SaveShards(save, &saved);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("ps-0.shards"));
}

// A ParameterServerService that requires the token "secret".
class TokenPsServer : public TestPsServer {
 public:
  TokenPsServer() : TestPsServer(RpcAuth("secret")) {}
};

// A context with a deadline and, unless empty, the token.
std::unique_ptr<grpc::ClientContext> Context(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(30));
  if (!token.empty()) context->AddMetadata(kJobTokenMetadataKey, token);
  return context;
}

TEST(PsServiceTokenTest, CallsWithoutTheTokenAreRefusedAndChangeNothing) {
  TokenPsServer server;
  ASSERT_TRUE(server.started());
  auto stub = server.NewStub();

  HealthResponse health;
  grpc::Status s = stub->Health(Context("").get(), HealthRequest(), &health);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("ParameterServer.Health"));
  EXPECT_THAT(s.error_message(), HasSubstr("no job token"));

  CreateShardsResponse created;
  s = stub->CreateShards(Context("").get(), Shards(), &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  s = stub->CreateShards(Context("guess").get(), Shards(), &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("wrong job token"));
  EXPECT_EQ(server.store().num_shards(), 0);

  s = stub->CreateShards(Context("secret").get(), Shards(), &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(server.store().num_shards(), 3);

  // The streaming calls, two of them registered raw.
  {
    PullRequest pull;
    pull.add_shards("w/part_0");
    auto context = Context("");
    auto reader = stub->PullDense(context.get(), pull);
    TensorChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto context = Context("");
    PushResponse response;
    auto writer = stub->PushDense(context.get(), &response);
    TensorChunk chunk;
    chunk.set_name("w/part_0");
    chunk.set_total_bytes(150 * kCols * 4);
    chunk.set_data(std::string(150 * kCols * 4, '\0'));
    writer->Write(chunk);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    PullRowsRequest pull;
    pull.set_shard("emb/part_0");
    auto context = Context("");
    auto reader = stub->PullRows(context.get(), pull);
    RowsChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto context = Context("");
    PushResponse response;
    auto writer = stub->PushRows(context.get(), &response);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  ScratchDir dir;
  SaveShardsRequest save;
  save.set_directory(dir.path());
  SaveShardsResponse saved;
  s = stub->SaveShards(Context("").get(), save, &saved);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ps-0.shards"));
  RestoreShardsResponse restored;
  s = stub->RestoreShards(Context("").get(), RestoreShardsRequest(), &restored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ShutdownResponse bye;
  s = stub->Shutdown(Context("").get(), ShutdownRequest(), &bye);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Nothing moved: no push was applied.
  absl::StatusOr<std::shared_ptr<Shard>> shard =
      server.store().Find("w/part_0");
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ((*shard)->version(), 0);

  // With the token, the same calls go through.
  {
    PullRequest pull;
    pull.add_shards("w/part_0");
    auto context = Context("secret");
    auto reader = stub->PullDense(context.get(), pull);
    TensorChunk chunk;
    int64_t bytes = 0;
    while (reader->Read(&chunk)) bytes += chunk.data().size();
    grpc::Status finished = reader->Finish();
    EXPECT_TRUE(finished.ok()) << finished.error_message();
    EXPECT_EQ(bytes, 150 * kCols * 4);
  }
  s = stub->SaveShards(Context("secret").get(), save, &saved);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/ps-0.shards"));
  s = stub->Health(Context("secret").get(), HealthRequest(), &health);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(health.num_shards(), 3);
}

}  // namespace
}  // namespace tessera
