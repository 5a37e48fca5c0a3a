// The no-lost-update load test (issue #7): two real tessera_ps processes on
// loopback, a variable split into shards over both, and 8 client threads,
// each with its own channels as a worker has, pushing dense gradients as
// fast as they can for a bounded time. The gradients are chosen so that
// every float sum is exact (worker w pushes all (w + 1), SGD with learning
// rate 0.5, every partial sum a multiple of 0.5 far below 2^23), so the
// result does not depend on the order the servers applied the pushes in:
// each element must end at exactly init - lr * sum_w(pushes_w * (w + 1)),
// and each shard's version (its count of applied updates) must equal the
// pushes acknowledged to it, each acknowledged push having been given its
// own version. Calls carry the job's token (security_).

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "deploy/local/free_ports.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "partitioners/shard_layout.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"
#include "ps_server/client/ps_client.h"
#include "tests/shell_command.h"

namespace tessera {
namespace {

constexpr int kNumPs = 2;
constexpr int kNumWorkers = 8;
constexpr int kNumShards = 4;
constexpr int64_t kRows = 1000;
constexpr int64_t kCols = 64;  // 250 x 64 floats = 64 KB per shard.
constexpr float kInit = 4096.0f;
constexpr float kLearningRate = 0.5f;
// Pushes travel as several chunks, so chunk reassembly is under load too.
constexpr int64_t kChunkBytes = 16 * 1024;
// The bound on the run: whichever comes first. 20000 pushes of at most 8
// by 8 workers keep every partial sum below 8 * 20000 * 36 * 0.5, far
// inside float's exact integers.
constexpr absl::Duration kPushFor = absl::Seconds(3);
constexpr int kMaxPushesPerServer = 20000;
// Workers pull (as before a step) every this many pushes.
constexpr int kPullEvery = 8;

float Gradient(int worker) { return static_cast<float>(worker + 1); }

// What one worker thread saw.
struct WorkerResult {
  // Acknowledged pushes per parameter server.
  std::vector<int64_t> pushes = std::vector<int64_t>(kNumPs, 0);
  // The versions PushResponses gave each shard, by shard index.
  std::vector<std::vector<int64_t>> versions =
      std::vector<std::vector<int64_t>>(kNumShards);
  int64_t pulls = 0;
  absl::Status error;
};

class LoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/tessera_load_test.XXXXXX";
    dir_ = mkdtemp(pattern.data());
    // The job's token, as a launcher writes it for the servers.
    absl::StatusOr<std::string> token = GenerateJobToken();
    ASSERT_TRUE(token.ok()) << token.status();
    token_file_ = dir_ + "/job.token";
    std::ofstream(token_file_) << *token << "\n";
    chmod(token_file_.c_str(), 0600);
    security_.job_token = *token;

    absl::StatusOr<ShardLayout> layout = ShardLayout::Div(kRows, kNumShards);
    ASSERT_TRUE(layout.ok()) << layout.status();
    layout_.emplace(*layout);
    // Another process may take a picked port before a server binds it; a
    // fresh pick then almost surely works.
    for (int attempt = 0; attempt < 3 && addresses_.empty(); ++attempt) {
      StartServers();
    }
    ASSERT_EQ(addresses_.size(), static_cast<size_t>(kNumPs))
        << "the parameter servers did not start; logs in " << dir_;
  }

  void TearDown() override {
    group_.StopAll(absl::Seconds(5));
    if (!HasFailure()) {
      std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
    }
  }

  // Starts kNumPs tessera_ps and waits until both answer Health; leaves
  // addresses_ empty (and nothing running) when one did not come up.
  void StartServers() {
    absl::StatusOr<std::vector<int>> ports = PickFreePorts(kNumPs);
    ASSERT_TRUE(ports.ok()) << ports.status();
    std::vector<std::string> addresses;
    std::string cluster;
    for (int port : *ports) {
      addresses.push_back(absl::StrCat("127.0.0.1:", port));
      absl::StrAppend(&cluster, cluster.empty() ? "" : ",", "\"",
                      addresses.back(), "\"");
    }
    for (int k = 0; k < kNumPs; ++k) {
      ChildSpec spec;
      spec.name = absl::StrCat("ps-", k, "-", starts_++);
      spec.binary = BuildDir() + "/ps_server/tessera_ps";
      spec.args = {"--job_token_file=" + token_file_};
      spec.env.emplace_back("TF_CONFIG",
                            absl::StrCat("{\"cluster\": {\"ps\": [", cluster,
                                         "]}, \"task\": {\"type\": \"ps\", "
                                         "\"index\": ",
                                         k, "}}"));
      spec.env.emplace_back("GLOG_logtostderr", "1");
      spec.log_path = absl::StrCat(dir_, "/ps-", k, ".log");
      absl::StatusOr<pid_t> pid = group_.Start(spec);
      ASSERT_TRUE(pid.ok()) << pid.status();
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    for (int k = 0; k < kNumPs; ++k) {
      PsClient client(addresses[k], k, MakeChannel(addresses[k], security_));
      absl::Status health = absl::UnavailableError("not asked yet");
      while (!health.ok() && absl::Now() < deadline &&
             group_.num_running() == kNumPs) {
        HealthResponse response;
        health = client.Health(&response, /*timeout_s=*/1);
        if (!health.ok()) absl::SleepFor(absl::Milliseconds(50));
      }
      if (!health.ok()) {
        group_.StopAll(absl::Seconds(5));
        return;
      }
    }
    addresses_ = std::move(addresses);
  }

  // Shard i lives on parameter server i % kNumPs, as the coordinator
  // places shards ((k + i) % num_ps with k = 0).
  static int ServerOf(int shard) { return shard % kNumPs; }
  static std::string ShardName(int shard) {
    return absl::StrCat("load/w/part_", shard);
  }
  int64_t ShardElements(int shard) const {
    return layout_->shard_rows(shard) * kCols;
  }
  std::vector<int> ShardsOn(int ps) const {
    std::vector<int> shards;
    for (int i = 0; i < kNumShards; ++i) {
      if (ServerOf(i) == ps) shards.push_back(i);
    }
    return shards;
  }

  CreateShardsRequest ShardsRequest(int ps) const {
    CreateShardsRequest request;
    request.mutable_optimizer()->set_learning_rate(kLearningRate);
    request.mutable_optimizer()->mutable_sgd();
    for (int i : ShardsOn(ps)) {
      ShardDef* def = request.add_shards();
      def->set_name(ShardName(i));
      def->set_variable("load/w");
      def->set_index(i);
      def->set_row_offset(layout_->shard_offset(i));
      def->mutable_variable_shape()->add_dims(kRows);
      def->mutable_variable_shape()->add_dims(kCols);
      def->mutable_shape()->add_dims(layout_->shard_rows(i));
      def->mutable_shape()->add_dims(kCols);
      def->set_dtype(DT_FLOAT);
      def->mutable_initializer()->set_kind(Initializer::CONSTANT);
      def->mutable_initializer()->set_value(kInit);
    }
    return request;
  }

  // One worker: its own channel to each server, pushing until `deadline`
  // or kMaxPushesPerServer, pulling every kPullEvery pushes.
  WorkerResult RunWorker(int w, absl::Time deadline) const {
    WorkerResult result;
    PsClientOptions options;
    options.chunk_bytes = kChunkBytes;
    std::vector<std::unique_ptr<PsClient>> clients;
    for (int k = 0; k < kNumPs; ++k) {
      clients.push_back(std::make_unique<PsClient>(
          addresses_[k], k, MakeChannel(addresses_[k], security_), options));
    }
    // Per server: its shard names, gradients and pull buffers.
    std::vector<std::vector<std::string>> names(kNumPs);
    std::vector<std::vector<std::vector<float>>> grads(kNumPs), pulled(kNumPs);
    for (int k = 0; k < kNumPs; ++k) {
      for (int i : ShardsOn(k)) {
        names[k].push_back(ShardName(i));
        grads[k].emplace_back(ShardElements(i), Gradient(w));
        pulled[k].emplace_back(ShardElements(i));
      }
    }
    for (int n = 0; n < kMaxPushesPerServer && absl::Now() < deadline; ++n) {
      for (int k = 0; k < kNumPs; ++k) {
        if (n % kPullEvery == 0) {
          std::vector<absl::Span<float>> out(pulled[k].begin(),
                                             pulled[k].end());
          absl::Status pull = clients[k]->PullDense(names[k], out, nullptr);
          if (!pull.ok()) {
            result.error = pull;
            return result;
          }
          ++result.pulls;
        }
        std::vector<absl::Span<const float>> g(grads[k].begin(),
                                               grads[k].end());
        PushResponse response;
        absl::Status push = clients[k]->PushDense(names[k], g, {}, &response);
        if (!push.ok()) {
          // Whether the server applied it is unknown; the exact check
          // below would be meaningless, so the test fails here.
          result.error = push;
          return result;
        }
        ++result.pushes[k];
        for (const ShardVersion& applied : response.applied()) {
          for (int i : ShardsOn(k)) {
            if (applied.name() == ShardName(i)) {
              result.versions[i].push_back(applied.version());
            }
          }
        }
      }
    }
    return result;
  }

  std::string dir_;
  std::string token_file_;
  ChannelSecurity security_;  // the channels' token
  std::optional<ShardLayout> layout_;
  std::vector<std::string> addresses_;
  int starts_ = 0;
  ProcessGroup group_;
};

TEST_F(LoadTest, EightWorkersTwoServersLoseNoUpdate) {
  for (int k = 0; k < kNumPs; ++k) {
    PsClient client(addresses_[k], k, MakeChannel(addresses_[k], security_));
    CreateShardsResponse response;
    absl::Status created = client.CreateShards(ShardsRequest(k), &response);
    ASSERT_TRUE(created.ok()) << created;
    EXPECT_EQ(response.created(), static_cast<int>(ShardsOn(k).size()));
  }

  // All workers start together and stop at the same time.
  std::vector<WorkerResult> results(kNumWorkers);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  absl::Time deadline;
  std::atomic<int> ready{0};
  for (int w = 0; w < kNumWorkers; ++w) {
    threads.emplace_back([&, w] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      results[w] = RunWorker(w, deadline);
    });
  }
  while (ready.load() < kNumWorkers) std::this_thread::yield();
  const absl::Time start = absl::Now();
  deadline = start + kPushFor;
  go = true;
  for (std::thread& t : threads) t.join();
  const absl::Duration took = absl::Now() - start;

  // Expected state of each server's shards, from the acknowledged pushes.
  std::vector<int64_t> pushes(kNumPs, 0);
  std::vector<double> subtracted(kNumPs, 0);
  int64_t total_pushes = 0, total_pulls = 0;
  for (int w = 0; w < kNumWorkers; ++w) {
    ASSERT_TRUE(results[w].error.ok())
        << "worker " << w << ": " << results[w].error;
    for (int k = 0; k < kNumPs; ++k) {
      EXPECT_GT(results[w].pushes[k], 0) << "worker " << w << " ps " << k;
      pushes[k] += results[w].pushes[k];
      subtracted[k] += static_cast<double>(kLearningRate) *
                       results[w].pushes[k] * Gradient(w);
      total_pushes += results[w].pushes[k];
    }
    total_pulls += results[w].pulls;
  }
  std::printf(
      "load: %d workers pushed %lld times (%.0f pushes/s, %lld pulls) to %d "
      "servers in %.2f s\n",
      kNumWorkers, static_cast<long long>(total_pushes),
      total_pushes / absl::ToDoubleSeconds(took),
      static_cast<long long>(total_pulls), kNumPs, absl::ToDoubleSeconds(took));

  for (int i = 0; i < kNumShards; ++i) {
    const int k = ServerOf(i);
    PsClient client(addresses_[k], k, MakeChannel(addresses_[k], security_));
    std::vector<float> values(ShardElements(i), -1.0f);
    std::vector<int64_t> versions;
    const std::string name = ShardName(i);
    std::vector<absl::Span<float>> out = {absl::MakeSpan(values)};
    absl::Status pull = client.PullDense({name}, out, &versions);
    ASSERT_TRUE(pull.ok()) << pull;
    ASSERT_EQ(versions.size(), 1u);

    // The server applied exactly the acknowledged pushes...
    EXPECT_EQ(versions[0], pushes[k]) << name;
    // ...each under its own version, none skipped or given twice.
    std::vector<int64_t> seen;
    for (const WorkerResult& r : results) {
      seen.insert(seen.end(), r.versions[i].begin(), r.versions[i].end());
    }
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(seen.size(), static_cast<size_t>(pushes[k])) << name;
    for (int64_t v = 0; v < pushes[k]; ++v) {
      if (seen[v] != v + 1) {
        ADD_FAILURE() << name << ": acknowledged versions are not 1.."
                      << pushes[k] << "; position " << v << " holds "
                      << seen[v];
        break;
      }
    }

    // ...and every element is exactly what those updates give.
    const double expected_double = kInit - subtracted[k];
    const float expected = static_cast<float>(expected_double);
    ASSERT_EQ(static_cast<double>(expected), expected_double)
        << "the test's sums must be exact in float";
    int64_t wrong = 0;
    for (float v : values) wrong += v != expected;
    EXPECT_EQ(wrong, 0) << name << ": " << wrong << " of " << values.size()
                        << " elements differ from " << expected
                        << ", e.g. element 0 is " << values[0];
  }
}

TEST_F(LoadTest, PushWithoutTheTokenIsRefusedAndChangesNothing) {
  PsClient client(addresses_[0], 0, MakeChannel(addresses_[0], security_));
  CreateShardsResponse created;
  ASSERT_TRUE(client.CreateShards(ShardsRequest(0), &created).ok());

  PsClient stranger(addresses_[0], 0,
                    MakeChannel(addresses_[0], ChannelSecurity{}));
  const std::string name = ShardName(0);
  std::vector<float> grad(ShardElements(0), 1.0f);
  std::vector<absl::Span<const float>> g = {absl::MakeConstSpan(grad)};
  PushResponse response;
  absl::Status push = stranger.PushDense({name}, g, {}, &response);
  EXPECT_EQ(push.code(), absl::StatusCode::kUnauthenticated) << push;

  std::vector<float> values(ShardElements(0));
  std::vector<int64_t> versions;
  std::vector<absl::Span<float>> out = {absl::MakeSpan(values)};
  ASSERT_TRUE(client.PullDense({name}, out, &versions).ok());
  EXPECT_EQ(versions[0], 0);
  EXPECT_EQ(values.front(), kInit);
  EXPECT_EQ(values.back(), kInit);
}

}  // namespace
}  // namespace tessera
