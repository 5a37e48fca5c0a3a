#include "worker/collective/negotiated_all_reducer.h"

#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// n ranks in one process that sum through shared memory: a stand-in for
// both the gRPC ring and NCCL, counting the calls each gets.
class FakeGroup {
 public:
  explicit FakeGroup(int n) : n_(n) {}

  absl::Status AllReduce(absl::Span<float> data) {
    absl::MutexLock lock(&mu_);
    const int64_t round = round_;
    if (sum_.empty()) sum_.assign(data.size(), 0.0f);
    if (sum_.size() != data.size()) {
      return absl::InvalidArgumentError("ranks disagree on the size");
    }
    for (size_t i = 0; i < data.size(); ++i) sum_[i] += data[i];
    ++calls_;
    if (++arrived_ == n_) {
      result_ = std::move(sum_);
      sum_.clear();
      arrived_ = 0;
      ++round_;
    } else {
      auto next = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return round_ > round;
      };
      mu_.Await(absl::Condition(&next));
    }
    std::copy(result_.begin(), result_.end(), data.begin());
    return absl::OkStatus();
  }
  int64_t calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  const int n_;
  absl::Mutex mu_;
  std::vector<float> sum_ ABSL_GUARDED_BY(mu_);
  std::vector<float> result_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t round_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
};

class FakeRank final : public AllReducer {
 public:
  FakeRank(FakeGroup* group, int rank, int n)
      : group_(group), rank_(rank), n_(n) {}
  int rank() const override { return rank_; }
  int num_ranks() const override { return n_; }
  Memory memory() const override { return Memory::kHost; }
  absl::Status AllReduce(absl::Span<float> data) override {
    return group_->AllReduce(data);
  }

 private:
  FakeGroup* group_;
  int rank_, n_;
};

struct Outcome {
  std::vector<bool> nccl;        // per rank: using_nccl()
  std::vector<std::string> ids;  // per rank: the id NCCL was given
  std::vector<std::vector<float>> sums;
};

// Every rank all-reduces {rank + 1, 10} twice; `gpu[r]` says whether rank r
// has a GPU, `join_fails[r]` whether joining NCCL fails there and
// `no_library[r]` (empty: none) whether NCCL cannot be loaded there.
Outcome RunGroup(FakeGroup* nccl_group, const std::vector<bool>& gpu,
                 const std::vector<bool>& join_fails, bool built = true,
                 const std::vector<bool>& no_library = {}) {
  const int n = static_cast<int>(gpu.size());
  FakeGroup ring_group(n);
  Outcome out;
  out.nccl.assign(n, false);
  out.ids.assign(n, "");
  out.sums.assign(n, {});
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      FakeRank ring(&ring_group, r, n);
      NcclChoice choice;
      choice.cuda_device = gpu[r] ? r : -1;
      if (built) {
        choice.new_id = [] {
          std::string id(128, '\0');
          for (int i = 0; i < 128; ++i) id[i] = static_cast<char>(255 - i);
          return absl::StatusOr<std::string>(id);
        };
        choice.make = [&, r](int rank, int num_ranks, const std::string& id)
            -> absl::StatusOr<std::unique_ptr<AllReducer>> {
          out.ids[r] = id;
          if (join_fails[r]) return absl::InternalError("no NVLink today");
          return std::unique_ptr<AllReducer>(
              std::make_unique<FakeRank>(nccl_group, rank, num_ranks));
        };
        const bool missing = !no_library.empty() && no_library[r];
        choice.load = [missing] {
          return missing ? absl::UnavailableError("no libnccl.so.2")
                         : absl::OkStatus();
        };
      }
      NegotiatedAllReducer reducer(&ring, choice);
      for (int round = 0; round < 2; ++round) {
        std::vector<float> data = {float(r + 1), 10.0f};
        EXPECT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
        out.sums[r] = data;
      }
      out.nccl[r] = reducer.using_nccl();
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(NegotiatedAllReducerTest, EveryWorkerWithAGpuMeansNccl) {
  FakeGroup nccl(3);
  Outcome out = RunGroup(&nccl, {true, true, true}, {false, false, false});
  std::string expected_id(128, '\0');
  for (int i = 0; i < 128; ++i) expected_id[i] = static_cast<char>(255 - i);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(out.nccl[r]) << r;
    // Rank 0's id reached every rank intact through the float sum.
    EXPECT_EQ(out.ids[r], expected_id) << r;
    EXPECT_THAT(out.sums[r], ElementsAre(6.0f, 30.0f));
  }
  EXPECT_EQ(nccl.calls(), 3 * 2);  // both rounds went through NCCL
}

TEST(NegotiatedAllReducerTest, OneWorkerOnTheCpuKeepsEveryoneOnTheRing) {
  FakeGroup nccl(3);
  Outcome out = RunGroup(&nccl, {true, false, true}, {false, false, false});
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(out.nccl[r]) << r;
    EXPECT_EQ(out.ids[r], "") << r;  // nobody tried to join
    EXPECT_THAT(out.sums[r], ElementsAre(6.0f, 30.0f));
  }
  EXPECT_EQ(nccl.calls(), 0);
}

TEST(NegotiatedAllReducerTest, AFailedJoinAnywhereKeepsEveryoneOnTheRing) {
  FakeGroup nccl(2);
  Outcome out = RunGroup(&nccl, {true, true}, {false, true});
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(out.nccl[r]) << r;
    EXPECT_THAT(out.sums[r], ElementsAre(3.0f, 20.0f));
  }
  EXPECT_EQ(nccl.calls(), 0);
}

// NCCL is the node's, not the binary's: a worker with a GPU where it
// cannot be loaded votes for the ring, so nobody tries to join.
TEST(NegotiatedAllReducerTest, ANodeWithoutTheNcclLibraryKeepsAllOnTheRing) {
  FakeGroup nccl(3);
  Outcome out = RunGroup(&nccl, {true, true, true}, {false, false, false},
                         /*built=*/true, /*no_library=*/{false, true, false});
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(out.nccl[r]) << r;
    EXPECT_EQ(out.ids[r], "") << r;
    EXPECT_THAT(out.sums[r], ElementsAre(6.0f, 30.0f));
  }
  EXPECT_EQ(nccl.calls(), 0);
}

TEST(NegotiatedAllReducerTest, ABuildWithoutNcclUsesTheRing) {
  FakeGroup nccl(2);
  Outcome out = RunGroup(&nccl, {true, true}, {false, false}, /*built=*/false);
  EXPECT_FALSE(out.nccl[0]);
  EXPECT_FALSE(out.nccl[1]);
  EXPECT_THAT(out.sums[1], ElementsAre(3.0f, 20.0f));
}

// Rank 0 of 2 whose peer is simulated: each AllReduce adds the peer's next
// scripted contribution (zeros once the script ends) to the buffer.
class ScriptedPeerRing final : public AllReducer {
 public:
  explicit ScriptedPeerRing(std::vector<std::vector<float>> script)
      : script_(std::move(script)) {}
  int rank() const override { return 0; }
  int num_ranks() const override { return 2; }
  Memory memory() const override { return Memory::kHost; }
  absl::Status AllReduce(absl::Span<float> data) override {
    if (calls_ < script_.size()) {
      const std::vector<float>& peer = script_[calls_];
      for (size_t i = 0; i < peer.size() && i < data.size(); ++i) {
        data[i] += peer[i];
      }
    }
    ++calls_;
    return absl::OkStatus();
  }
  size_t calls() const { return calls_; }

 private:
  std::vector<std::vector<float>> script_;
  size_t calls_ = 0;
};

// A CPU-only build has no NCCL factory: a peer whose GPU vote counts twice
// makes the total 2 of 2, yet this worker must not try to join (the empty
// factory once threw bad_function_call); it votes against in the
// confirmation, and both stay on the ring.
TEST(NegotiatedAllReducerTest, APeerOvervotingDoesNotMakeACpuWorkerJoin) {
  for (bool gpu : {false, true}) {
    SCOPED_TRACE(gpu);
    // The peer's offer (vote 2), then its confirmation (1).
    ScriptedPeerRing ring(std::vector<std::vector<float>>{{2.0f}, {1.0f}});
    NcclChoice choice;
    choice.cuda_device = gpu ? 0 : -1;  // no make, no new_id: not built
    NegotiatedAllReducer reducer(&ring, choice);
    std::vector<float> data = {1.0f, 2.0f};
    absl::Status s = reducer.AllReduce(absl::MakeSpan(data));
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_FALSE(reducer.using_nccl());
    EXPECT_EQ(ring.calls(), 3u);  // offer, confirmation, the data
    EXPECT_THAT(data, ElementsAre(1.0f, 2.0f));
  }
}

// Vote totals no honest workers can make are an error on every rank,
// naming the value, and nobody joins NCCL.
TEST(NegotiatedAllReducerTest, AVoteTotalOutsideTheRankCountIsAnError) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float peer_vote : {5.0f, -3.0f, 0.5f, nan}) {
    SCOPED_TRACE(peer_vote);
    ScriptedPeerRing ring(std::vector<std::vector<float>>{{peer_vote}});
    NcclChoice choice;
    choice.cuda_device = 0;
    bool made = false;
    choice.new_id = [] {
      return absl::StatusOr<std::string>(std::string(128, 'x'));
    };
    choice.make = [&made](int, int, const std::string&)
        -> absl::StatusOr<std::unique_ptr<AllReducer>> {
      made = true;
      return absl::InternalError("must not be called");
    };
    NegotiatedAllReducer reducer(&ring, choice);
    std::vector<float> data = {1.0f};
    absl::Status s = reducer.AllReduce(absl::MakeSpan(data));
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("sum to ", 1.0f + peer_vote)));
    EXPECT_FALSE(made);
  }
  // The confirmation is checked the same way.
  ScriptedPeerRing ring(std::vector<std::vector<float>>{{1.0f}, {7.0f}});
  NcclChoice choice;
  choice.cuda_device = 0;
  choice.new_id = [] {
    return absl::StatusOr<std::string>(std::string(128, 'x'));
  };
  choice.make =
      [](int, int,
         const std::string&) -> absl::StatusOr<std::unique_ptr<AllReducer>> {
    return std::unique_ptr<AllReducer>(
        std::make_unique<ScriptedPeerRing>(std::vector<std::vector<float>>{}));
  };
  NegotiatedAllReducer reducer(&ring, choice);
  std::vector<float> data = {1.0f};
  absl::Status s = reducer.AllReduce(absl::MakeSpan(data));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("NCCL join votes of 2 workers sum to 8"));
  EXPECT_FALSE(reducer.using_nccl());
}

// An id byte pushed out of range by a peer is refused, not wrapped.
TEST(NegotiatedAllReducerTest, AnIdByteOutOfRangeIsAnError) {
  std::vector<float> peer(129, 0.0f);
  peer[0] = 1.0f;
  peer[5] = 300.0f;
  ScriptedPeerRing ring(std::vector<std::vector<float>>{peer});
  NcclChoice choice;
  choice.cuda_device = 0;
  choice.new_id = [] {
    return absl::StatusOr<std::string>(std::string(128, 'x'));
  };
  choice.make =
      [](int, int,
         const std::string&) -> absl::StatusOr<std::unique_ptr<AllReducer>> {
    return absl::InternalError("must not be called");
  };
  NegotiatedAllReducer reducer(&ring, choice);
  std::vector<float> data = {1.0f};
  absl::Status s = reducer.AllReduce(absl::MakeSpan(data));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("byte 4 of the NCCL unique id sums to"));
}

// A one-rank group's member whose sums are the data itself; on the
// device (as NCCL) when `device` is set, noting the stream it was given.
class OneRankReducer final : public AllReducer {
 public:
  explicit OneRankReducer(bool device) : device_(device) {}
  int rank() const override { return 0; }
  int num_ranks() const override { return 1; }
  Memory memory() const override { return Memory::kHost; }
  absl::Status AllReduce(absl::Span<float>) override {
    ++host_calls;
    return absl::OkStatus();
  }
  bool on_device() const override { return device_; }
  absl::Status AllReduceOnDevice(absl::Span<float> data,
                                 void* stream) override {
    ++device_calls;
    last_stream = stream;
    last_size = data.size();
    return absl::OkStatus();
  }

  int host_calls = 0, device_calls = 0;
  void* last_stream = nullptr;
  size_t last_size = 0;

 private:
  const bool device_;
};

// The device path opens only once every rank agreed on NCCL, and then
// hands NCCL the device buffer and the producer's stream as they are.
TEST(NegotiatedAllReducerTest, OnDeviceOnlyAfterAgreeingOnNccl) {
  OneRankReducer ring(false);
  OneRankReducer* nccl = nullptr;
  NcclChoice choice;
  choice.cuda_device = 0;
  choice.new_id = [] {
    return absl::StatusOr<std::string>(std::string(128, 'x'));
  };
  choice.make = [&nccl](int, int, const std::string&)
      -> absl::StatusOr<std::unique_ptr<AllReducer>> {
    auto made = std::make_unique<OneRankReducer>(true);
    nccl = made.get();
    return std::unique_ptr<AllReducer>(std::move(made));
  };
  NegotiatedAllReducer reducer(&ring, choice);
  std::vector<float> data = {1.0f, 2.0f};
  EXPECT_FALSE(reducer.on_device());
  EXPECT_EQ(reducer.AllReduceOnDevice(absl::MakeSpan(data), nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
  ASSERT_TRUE(reducer.using_nccl());
  ASSERT_NE(nccl, nullptr);
  EXPECT_TRUE(reducer.on_device());
  int stream = 0;  // any address stands for a CUDA stream here
  ASSERT_TRUE(reducer.AllReduceOnDevice(absl::MakeSpan(data), &stream).ok());
  EXPECT_EQ(nccl->device_calls, 1);
  EXPECT_EQ(nccl->last_stream, &stream);
  EXPECT_EQ(nccl->last_size, 2u);
  // The host path stays open, through NCCL too.
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
  EXPECT_EQ(nccl->host_calls, 2);
}

// A one-rank member that notes Abort, and whether it was aborted before
// it was destroyed (in `*aborted_at_end`).
class AbortableReducer final : public AllReducer {
 public:
  explicit AbortableReducer(bool* aborted_at_end = nullptr)
      : aborted_at_end_(aborted_at_end) {}
  ~AbortableReducer() override {
    if (aborted_at_end_ != nullptr) *aborted_at_end_ = !why.ok();
  }
  int rank() const override { return 0; }
  int num_ranks() const override { return 1; }
  Memory memory() const override { return Memory::kHost; }
  absl::Status AllReduce(absl::Span<float>) override {
    return why.ok() ? absl::OkStatus() : why;
  }
  void Abort(const absl::Status& w) override { why = w; }
  bool on_device() const override { return true; }

  absl::Status why;

 private:
  bool* aborted_at_end_;
};

NcclChoice OneGpuChoice(std::function<std::unique_ptr<AllReducer>()> make) {
  NcclChoice choice;
  choice.cuda_device = 0;
  choice.new_id = [] {
    return absl::StatusOr<std::string>(std::string(128, 'x'));
  };
  choice.make = [make](int, int, const std::string&)
      -> absl::StatusOr<std::unique_ptr<AllReducer>> { return make(); };
  return choice;
}

// Survivors of a failed step are aborted by the worker: once the group is
// on NCCL, the abort must reach NCCL too, or they wait there until
// --rpc_timeout_s.
TEST(NegotiatedAllReducerTest, AbortReachesNccl) {
  AbortableReducer ring;
  AbortableReducer* nccl = nullptr;
  NegotiatedAllReducer reducer(&ring, OneGpuChoice([&nccl] {
    auto made = std::make_unique<AbortableReducer>();
    nccl = made.get();
    return made;
  }));
  std::vector<float> data = {1.0f};
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
  ASSERT_TRUE(reducer.using_nccl());
  reducer.Abort(absl::AbortedError("worker 1 gave the step up"));
  EXPECT_THAT(nccl->why.message(), HasSubstr("worker 1 gave the step up"));
  EXPECT_THAT(ring.why.message(), HasSubstr("worker 1 gave the step up"));
  EXPECT_THAT(reducer.AllReduce(absl::MakeSpan(data)).message(),
              HasSubstr("worker 1 gave the step up"));
}

// Restart after a failure aborts the NCCL communicator before dropping
// it: finalizing would wait for a peer that may be dead.
TEST(NegotiatedAllReducerTest, RestartAbortsNcclBeforeLeavingIt) {
  OneRankReducer ring(false);
  bool aborted_at_end = false;
  int made = 0;
  NegotiatedAllReducer reducer(&ring, OneGpuChoice([&] {
    ++made;
    return std::make_unique<AbortableReducer>(&aborted_at_end);
  }));
  std::vector<float> data = {1.0f};
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
  ASSERT_TRUE(reducer.using_nccl());
  reducer.Restart(7).IgnoreError();  // the one-rank ring cannot restart
  EXPECT_TRUE(aborted_at_end);
  EXPECT_FALSE(reducer.using_nccl());
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
  EXPECT_EQ(made, 2) << "the next AllReduce negotiates again";
}

// A ring re-formed between rounds (a worker joined or left a mirrored
// job, #48) leaves the NCCL communicator of the old members, aborted
// first, and hands the new members to the ring; the next AllReduce
// negotiates a communicator of the new size.
TEST(NegotiatedAllReducerTest, ReformLeavesNcclAndReformsTheRing) {
  class ReformableRing final : public AllReducer {
   public:
    int rank() const override { return rank_; }
    int num_ranks() const override { return static_cast<int>(peers_.size()); }
    Memory memory() const override { return Memory::kHost; }
    absl::Status AllReduce(absl::Span<float>) override {
      return absl::OkStatus();
    }
    absl::Status Reform(int rank, std::vector<std::string> peers,
                        uint64_t epoch) override {
      rank_ = rank;
      peers_ = std::move(peers);
      epoch_ = epoch;
      return absl::OkStatus();
    }
    int rank_ = 0;
    std::vector<std::string> peers_ = {"a:1"};
    uint64_t epoch_ = 0;
  } ring;
  bool aborted_at_end = false;
  std::vector<int> sizes;
  NcclChoice choice = OneGpuChoice(nullptr);
  choice.make =
      [&](int rank, int n,
          const std::string&) -> absl::StatusOr<std::unique_ptr<AllReducer>> {
    sizes.push_back(n);
    return std::unique_ptr<AllReducer>(
        std::make_unique<AbortableReducer>(&aborted_at_end));
  };
  NegotiatedAllReducer reducer(&ring, choice);
  std::vector<float> data = {1.0f};
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
  ASSERT_TRUE(reducer.using_nccl());
  ASSERT_TRUE(reducer.Reform(0, {"a:1"}, 500).ok());
  EXPECT_TRUE(aborted_at_end);
  EXPECT_FALSE(reducer.using_nccl());
  EXPECT_EQ(ring.epoch_, 500u);
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
  EXPECT_TRUE(reducer.using_nccl());
  EXPECT_EQ(sizes, (std::vector<int>{1, 1}))
      << "each negotiation makes a communicator of the ring's size";
}

// NCCL's join gives up well before the ring's vote on it does.
TEST(NegotiatedAllReducerTest, NcclInitGivesUpBeforeTheRingsVote) {
  EXPECT_LE(NcclInitTimeout(120), 60);
  EXPECT_GT(NcclInitTimeout(120), 0);
}

TEST(NegotiatedAllReducerTest, TheRingNeverSumsOnTheDevice) {
  OneRankReducer ring(false);
  NegotiatedAllReducer reducer(&ring, NcclChoice{});  // a CPU worker
  std::vector<float> data = {1.0f};
  ASSERT_TRUE(reducer.AllReduce(absl::MakeSpan(data)).ok());
  EXPECT_FALSE(reducer.using_nccl());
  EXPECT_FALSE(reducer.on_device());
  EXPECT_EQ(reducer.AllReduceOnDevice(absl::MakeSpan(data), nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tessera
