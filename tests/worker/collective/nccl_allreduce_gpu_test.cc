// The NCCL path on a real GPU: a one-rank communicator's all-reduce (of
// host and device data, and of device data written by work still queued on
// the backend's stream) and its teardown, and the negotiated all-reducer
// of a one-worker group reaching the device path. Skips where no GPU
// answers, or fails with TESSERA_REQUIRE_GPU=1 (tests/gpu_test_util.h).

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/collective/nccl_allreduce.h"
#include "worker/collective/negotiated_all_reducer.h"

namespace tessera {
namespace {

TEST(NcclAllReduceGpuTest, OneRankReducesAndTearsDownPromptly) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
  if (!gpu.ok()) {
    TESSERA_NO_GPU() << "no GPU for NCCL: " << gpu.status().message();
  }
  if (!NcclBuilt()) {
    TESSERA_NO_GPU() << "this build has no NCCL (nccl.h was not found)";
  }
  absl::StatusOr<std::string> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const auto start = std::chrono::steady_clock::now();
  {
    absl::StatusOr<std::unique_ptr<NcclAllReduce>> nccl =
        NcclAllReduce::Create(0, 1, *id, 0, 10);
    ASSERT_TRUE(nccl.ok()) << nccl.status();
    // One rank: the sum is the data itself, host and device alike.
    std::vector<float> host = {1.5f, -2.0f, 3.25f};
    ASSERT_TRUE((*nccl)->AllReduceHost(absl::MakeSpan(host)).ok());
    EXPECT_EQ(host, std::vector<float>({1.5f, -2.0f, 3.25f}));
    DeviceArray<float> device(gpu->get(), 3);
    (*gpu)->CopyToDevice(host.data(), device.data(), 3 * sizeof(float));
    ASSERT_TRUE((*gpu)->Synchronize().ok());
    ASSERT_TRUE((*nccl)->AllReduce(absl::MakeSpan(device.data(), 3)).ok());
    std::vector<float> back(3);
    (*gpu)->CopyToHost(device.data(), back.data(), 3 * sizeof(float));
    ASSERT_TRUE((*gpu)->Synchronize().ok());
    EXPECT_EQ(back, host);
  }  // finalize and destroy
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10))
      << "the communicator's teardown took the whole deadline";
}

// Abort from another thread fails the communicator's next all-reduce with
// the reason, and its teardown aborts at once instead of finalizing.
TEST(NcclAllReduceGpuTest, AbortFailsTheNextAllReduceAndTearsDownAtOnce) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
  if (!gpu.ok()) {
    TESSERA_NO_GPU() << "no GPU for NCCL: " << gpu.status().message();
  }
  if (!NcclBuilt()) {
    TESSERA_NO_GPU() << "this build has no NCCL (nccl.h was not found)";
  }
  absl::StatusOr<std::string> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<NcclAllReduce>> nccl =
      NcclAllReduce::Create(0, 1, *id, 0, 60, 10);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  std::thread([&] {
    (*nccl)->Abort(absl::AbortedError("worker 1 gave the step up"));
  }).join();
  std::vector<float> host = {1.0f};
  const absl::Status s = (*nccl)->AllReduceHost(absl::MakeSpan(host));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_NE(s.message().find("worker 1 gave the step up"),
            absl::string_view::npos)
      << s;
  const auto start = std::chrono::steady_clock::now();
  nccl->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// The gradients' path in mirrored training on GPUs: the backend writes
// device memory with work it has only queued (a large Axpby after a copy
// from pinned memory), and the all-reduce, ordered after it by an event
// rather than by the host waiting, sees that work's result: the same as
// the host path's sum of the same values.
TEST(NcclAllReduceGpuTest, DeviceDataAfterTheBackendsQueuedWork) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
  if (!gpu.ok()) {
    TESSERA_NO_GPU() << "no GPU for NCCL: " << gpu.status().message();
  }
  if (!NcclBuilt()) {
    TESSERA_NO_GPU() << "this build has no NCCL (nccl.h was not found)";
  }
  Backend* backend = gpu->get();
  ASSERT_NE(backend->native_stream(), nullptr);
  absl::StatusOr<std::string> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<NcclAllReduce>> nccl =
      NcclAllReduce::Create(0, 1, *id, 0, 10);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  const int64_t n = 1 << 24;  // 64 MiB: the Axpby is still running
  HostArray<float> host(backend, n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000);
  DeviceArray<float> x(backend, n), y(backend, n);
  backend->CopyToDevice(host.data(), x.data(), n * sizeof(float));
  backend->Axpby(n, 3.0f, x.data(), 0.0f, y.data());
  ASSERT_TRUE((*nccl)
                  ->AllReduceOnDevice(absl::MakeSpan(y.data(), n),
                                      backend->native_stream())
                  .ok());
  std::vector<float> got(n);
  backend->CopyToHost(y.data(), got.data(), n * sizeof(float));
  ASSERT_TRUE(backend->Synchronize().ok());
  std::vector<float> want(host.begin(), host.end());
  for (float& v : want) v *= 3.0f;
  ASSERT_TRUE((*nccl)->AllReduceHost(absl::MakeSpan(want)).ok());
  EXPECT_EQ(got, want);
}

// Two ranks on two GPUs, one thread each: the unique id shared, the peer
// transport between the GPUs, and a teardown with a live peer. Skips on a
// node with one GPU (gpu_check.sh's mirrored step covers two processes).
TEST(NcclAllReduceGpuTest, TwoRanksOnTwoGpusSumAcrossThem) {
  absl::StatusOr<std::unique_ptr<Backend>> first = NewCudaBackend(0);
  if (!first.ok()) {
    TESSERA_NO_GPU() << "no GPU for NCCL: " << first.status().message();
  }
  // One GPU is a node this test does not apply to, not a failure, even
  // with TESSERA_REQUIRE_GPU=1.
  absl::StatusOr<std::unique_ptr<Backend>> second = NewCudaBackend(1);
  if (!second.ok()) {
    GTEST_SKIP() << "no second GPU for a two-rank NCCL group: "
                 << second.status().message();
  }
  if (!NcclBuilt()) {
    TESSERA_NO_GPU() << "this build has no NCCL (nccl.h was not found)";
  }
  absl::StatusOr<std::string> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::Status status[2];
  std::vector<float> sums[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<NcclAllReduce>> nccl =
          NcclAllReduce::Create(r, 2, *id, r, 30, 15);
      if (!nccl.ok()) {
        status[r] = nccl.status();
        return;
      }
      sums[r] = {float(r + 1), 10.0f * (r + 1)};
      status[r] = (*nccl)->AllReduceHost(absl::MakeSpan(sums[r]));
    });  // each rank finalizes with its peer alive
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    EXPECT_EQ(sums[r], std::vector<float>({3.0f, 30.0f})) << "rank " << r;
  }
}

// A one-worker group with NCCL votes itself onto it in its first
// AllReduce (through the ring) and then sums device memory.
TEST(NcclAllReduceGpuTest, NegotiatedGroupReachesTheDevicePath) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
  if (!gpu.ok()) {
    TESSERA_NO_GPU() << "no GPU for NCCL: " << gpu.status().message();
  }
  if (!NcclBuilt()) {
    TESSERA_NO_GPU() << "this build has no NCCL (nccl.h was not found)";
  }
  // The ring of one rank: the sum is the data itself.
  class OneRankRing final : public AllReducer {
   public:
    int rank() const override { return 0; }
    int num_ranks() const override { return 1; }
    Memory memory() const override { return Memory::kHost; }
    absl::Status AllReduce(absl::Span<float>) override {
      return absl::OkStatus();
    }
  } ring;
  NegotiatedAllReducer reducer(&ring, DefaultNcclChoice(0, 10));
  std::vector<float> first = {1.0f, 2.0f};
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(first)).ok());
  EXPECT_EQ(first, std::vector<float>({1.0f, 2.0f}));
  ASSERT_TRUE(reducer.using_nccl());
  ASSERT_TRUE(reducer.on_device());
  const std::vector<float> values = {0.5f, -4.0f, 8.0f};
  DeviceArray<float> d(gpu->get(), 3);
  (*gpu)->CopyToDevice(values.data(), d.data(), 3 * sizeof(float));
  ASSERT_TRUE(reducer
                  .AllReduceOnDevice(absl::MakeSpan(d.data(), 3),
                                     (*gpu)->native_stream())
                  .ok());
  std::vector<float> back(3);
  (*gpu)->CopyToHost(d.data(), back.data(), 3 * sizeof(float));
  ASSERT_TRUE((*gpu)->Synchronize().ok());
  EXPECT_EQ(back, values);
}

}  // namespace
}  // namespace tessera
