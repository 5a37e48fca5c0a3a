#include "worker/collective/ring_allreduce.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/socket.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/tls_credentials.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/skip_unless_required.h"
#include "tests/tls_test_certs.h"
#include "worker/collective/ring_schedule.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// n ranks in this process, each with its own gRPC server on 127.0.0.1.
class Ring {
 public:
  // `singletons`: each rank starts as a ring of its own (a mirrored job's
  // one worker, or a worker that joins), to be re-formed by the test.
  explicit Ring(int n, RingAllReduceOptions options = {},
                int without_server = -1, bool singletons = false) {
    std::vector<std::string> peers;
    for (int r = 0; r < n; ++r) {
      auto ring = singletons ? RingAllReduce::Create(0, 1, options)
                             : RingAllReduce::Create(r, n, options);
      EXPECT_TRUE(ring.ok()) << ring.status();
      ranks_.push_back(*std::move(ring));
      int port = 0;
      grpc::ServerBuilder builder;
      builder.AddListeningPort(
          "127.0.0.1:0", MakeServerCredentials(options.security.tls), &port);
      ConfigureServerBuilder(&builder);
      ranks_.back()->RegisterService(&builder);
      servers_.push_back(builder.BuildAndStart());
      peers.push_back(absl::StrCat("127.0.0.1:", port));
    }
    // A dead peer: its port was real a moment ago, nothing listens now.
    if (without_server >= 0) Stop(without_server);
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(ranks_[r]
                      ->SetPeers(singletons ? std::vector<std::string>{peers[r]}
                                            : peers)
                      .ok());
    }
    peers_ = peers;
  }

  ~Ring() {
    for (size_t r = 0; r < servers_.size(); ++r) Stop(r);
  }

  void Stop(int r) {
    if (servers_[r] == nullptr) return;
    servers_[r]->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(200));
    servers_[r]->Wait();
    servers_[r].reset();
  }

  RingAllReduce& rank(int r) { return *ranks_[r]; }
  const std::string& address(int r) const { return peers_[r]; }
  int size() const { return static_cast<int>(ranks_.size()); }

  // Runs fn(rank) on every rank listed (default: all) at once.
  std::vector<absl::Status> Run(std::function<absl::Status(int)> fn,
                                std::vector<int> which = {}) {
    if (which.empty()) {
      for (int r = 0; r < size(); ++r) which.push_back(r);
    }
    std::vector<absl::Status> out(size());
    std::vector<std::thread> threads;
    for (int r : which) threads.emplace_back([&, r] { out[r] = fn(r); });
    for (std::thread& t : threads) t.join();
    return out;
  }

 private:
  std::vector<std::unique_ptr<RingAllReduce>> ranks_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> peers_;
};

// Values spread over several orders of magnitude and both signs, so that
// a different summation order would change the bits.
std::vector<std::vector<float>> RandomInputs(int n, int64_t size,
                                             uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<std::vector<float>> x(n, std::vector<float>(size));
  for (auto& v : x) {
    for (float& f : v) f = std::ldexp(mantissa(rng), exponent(rng));
  }
  return x;
}

// The sum in the order worker/collective/ring_schedule.h documents: segment j
// starts at rank j's values and adds ranks j+1, j+2, ... (mod n).
std::vector<float> RingOrderSum(const std::vector<std::vector<float>>& x) {
  const int n = static_cast<int>(x.size());
  const int64_t size = static_cast<int64_t>(x[0].size());
  RingSchedule layout(n, 0, size);
  std::vector<float> sum(size);
  for (int j = 0; j < n; ++j) {
    for (int64_t i = layout.SegmentBegin(j);
         i < layout.SegmentBegin(j) + layout.SegmentSize(j); ++i) {
      float acc = x[j][i];
      for (int k = 1; k < n; ++k) acc = acc + x[(j + k) % n][i];
      sum[i] = acc;
    }
  }
  return sum;
}

// Runs one all-reduce of `x` (one vector per rank) and checks every rank
// ends bit-identical to RingOrderSum and near the double-precision sum.
void ExpectAllReduceSums(Ring& ring, std::vector<std::vector<float>> x) {
  const std::vector<float> want = RingOrderSum(x);
  std::vector<absl::Status> status = ring.Run(
      [&](int r) { return ring.rank(r).AllReduce(absl::MakeSpan(x[r])); });
  for (int r = 0; r < ring.size(); ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    ASSERT_EQ(x[r].size(), want.size());
    EXPECT_EQ(
        std::memcmp(x[r].data(), want.data(), want.size() * sizeof(float)), 0)
        << "rank " << r << " differs from the documented summation order";
  }
}

TEST(RingScheduleTest, SegmentsTileTheBufferAndStepsChain) {
  for (int n : {1, 2, 3, 4, 7}) {
    for (int64_t size : {0, 1, 2, 3, 5, 100, 101}) {
      for (int r = 0; r < n; ++r) {
        RingSchedule s(n, r, size);
        int64_t next = 0;
        for (int j = 0; j < n; ++j) {
          EXPECT_EQ(s.SegmentBegin(j), next);
          EXPECT_GE(s.SegmentSize(j), size / n);
          EXPECT_LE(s.SegmentSize(j), size / n + 1);
          next += s.SegmentSize(j);
        }
        EXPECT_EQ(next, size);
        EXPECT_EQ(s.num_steps(), 2 * (n - 1));
        for (int step = 0; step + 1 < s.num_steps(); ++step) {
          EXPECT_EQ(s.SendSegment(step + 1), s.RecvSegment(step));
        }
        // What rank r receives at a step is what its left neighbour sends.
        RingSchedule left(n, (r + n - 1) % n, size);
        for (int step = 0; step < s.num_steps(); ++step) {
          EXPECT_EQ(s.RecvSegment(step), left.SendSegment(step));
          EXPECT_EQ(s.Reduces(step), step < n - 1);
        }
      }
    }
  }
}

// The ring's behaviour on each transport: Collective.Exchange streams and
// data plane connections must be indistinguishable to the caller.
class RingTransportTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  RingAllReduceOptions Options(RingAllReduceOptions options) const {
    options.data_plane = GetParam();
    return options;
  }
};

INSTANTIATE_TEST_SUITE_P(
    Transports, RingTransportTest,
    ::testing::Values(DataPlaneKind::kGrpc, DataPlaneKind::kTcp),
    [](const ::testing::TestParamInfo<DataPlaneKind>& info) {
      return std::string(DataPlaneName(info.param));
    });

TEST_P(RingTransportTest, SumsBitIdenticallyForTwoThreeAndFourRanks) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(absl::StrCat(n, " ranks"));
    // 64-byte chunks: many chunks per segment, so pipelining across
    // steps is exercised.
    Ring ring(n, Options({.chunk_bytes = 64, .timeout_s = 30}));
    for (int64_t size : {0, 1, n - 1, n, n + 1, 1000, 4099}) {
      SCOPED_TRACE(absl::StrCat(size, " elements"));
      ExpectAllReduceSums(ring, RandomInputs(n, size, 17 * n + size));
    }
  }
}

TEST_P(RingTransportTest, LargeBufferWithDefaultChunksIsNearTheExactSum) {
  const int n = 3;
  Ring ring(n, Options({.timeout_s = 60}));
  const int64_t size = (int64_t{3} << 20) + 7;  // 12 MiB, several chunks
  std::vector<std::vector<float>> x = RandomInputs(n, size, 5);
  std::vector<double> exact(size, 0.0);
  for (const auto& v : x) {
    for (int64_t i = 0; i < size; ++i) exact[i] += v[i];
  }
  ExpectAllReduceSums(ring, x);
  // And the documented order is within float rounding of the exact sum.
  const std::vector<float> got = RingOrderSum(x);
  double worst = 0;
  for (int64_t i = 0; i < size; ++i) {
    double scale = 0;
    for (const auto& v : x) scale += std::fabs(v[i]);
    worst = std::max(worst, std::fabs(got[i] - exact[i]) / scale);
  }
  EXPECT_LT(worst, 1e-6);
}

TEST_P(RingTransportTest, RepeatedCallsDoNotMixData) {
  const int n = 4;
  Ring ring(n, Options({.chunk_bytes = 256, .timeout_s = 30}));
  for (int call = 0; call < 8; ++call) {
    SCOPED_TRACE(absl::StrCat("call ", call));
    // Sizes change between calls too.
    ExpectAllReduceSums(ring, RandomInputs(n, 500 + 37 * call, call));
  }
}

TEST_P(RingTransportTest, BackToBackCallsWithoutABarrier) {
  // Each rank runs its calls in its own thread with no synchronisation in
  // between, so a fast rank's next call overlaps a slow rank's current one.
  const int n = 3, calls = 20;
  Ring ring(n, Options({.chunk_bytes = 128, .timeout_s = 30}));
  std::vector<std::vector<std::vector<float>>> x;  // [call][rank]
  for (int c = 0; c < calls; ++c) x.push_back(RandomInputs(n, 300 + c, 99 + c));
  std::vector<std::vector<float>> want;
  for (const auto& xc : x) want.push_back(RingOrderSum(xc));
  std::vector<absl::Status> status = ring.Run([&](int r) {
    for (int c = 0; c < calls; ++c) {
      absl::Status s = ring.rank(r).AllReduce(absl::MakeSpan(x[c][r]));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    for (int c = 0; c < calls; ++c) EXPECT_EQ(x[c][r], want[c]) << c;
  }
}

TEST(RingAllReduceTest, OneRankIsANoOp) {
  auto ring = RingAllReduce::Create(0, 1);
  ASSERT_TRUE(ring.ok());
  std::vector<float> x = {1, 2, 3};
  EXPECT_TRUE((*ring)->AllReduce(absl::MakeSpan(x)).ok());
  EXPECT_THAT(x, ::testing::ElementsAre(1, 2, 3));
}

TEST(RingAllReduceTest, BadConfigurationIsAnError) {
  EXPECT_TRUE(absl::IsInvalidArgument(RingAllReduce::Create(2, 2).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(RingAllReduce::Create(0, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      RingAllReduce::Create(0, 2, {.chunk_bytes = int64_t{1} << 30}).status()));
  auto ring = RingAllReduce::Create(0, 2);
  ASSERT_TRUE(ring.ok());
  std::vector<float> x(4);
  EXPECT_TRUE(
      absl::IsFailedPrecondition((*ring)->AllReduce(absl::MakeSpan(x))));
  EXPECT_TRUE(absl::IsInvalidArgument((*ring)->SetPeers({"127.0.0.1:1"})));
}

TEST_P(RingTransportTest, SizeMismatchFailsEveryRankAndNamesThePeer) {
  const int n = 3;
  Ring ring(n, Options({.chunk_bytes = 64, .timeout_s = 10}));
  std::vector<std::vector<float>> x = {std::vector<float>(100, 1.0f),
                                       std::vector<float>(101, 1.0f),
                                       std::vector<float>(100, 1.0f)};
  const auto start = std::chrono::steady_clock::now();
  std::vector<absl::Status> status = ring.Run(
      [&](int r) { return ring.rank(r).AllReduce(absl::MakeSpan(x[r])); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(9));
  // Which rank notices first varies, and the others hear of it as a peer
  // that gave up; every error names the peer it came from, and the ranks
  // next to the odd one out say what is wrong.
  int saw_mismatch = 0;
  for (int r = 0; r < n; ++r) {
    ASSERT_FALSE(status[r].ok()) << r;
    EXPECT_THAT(std::string(status[r].message()), HasSubstr("(127.0.0.1:"))
        << r;
    if (absl::StrContains(status[r].message(),
                          "all ranks must reduce buffers of one size")) {
      ++saw_mismatch;
    }
  }
  EXPECT_GE(saw_mismatch, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(status[1]) ||
              absl::IsInvalidArgument(status[2]))
      << status[1] << " / " << status[2];
}

TEST_P(RingTransportTest, DeadPeerGivesAnErrorWithinTheDeadline) {
  const int n = 3;
  const double timeout_s = 3;
  Ring ring(n, Options({.chunk_bytes = 64, .timeout_s = timeout_s}),
            /*without_server=*/2);
  std::vector<std::vector<float>> x = RandomInputs(n, 1000, 3);
  const auto start = std::chrono::steady_clock::now();
  std::vector<absl::Status> status = ring.Run(
      [&](int r) { return ring.rank(r).AllReduce(absl::MakeSpan(x[r])); },
      {0, 1});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, timeout_s + 2);
  EXPECT_FALSE(status[0].ok());
  // Rank 1 sends to the dead rank 2 and says so.
  EXPECT_FALSE(status[1].ok());
  EXPECT_THAT(std::string(status[1].message()),
              HasSubstr("rank 2 (" + ring.address(2) + ")"));
}

TEST_P(RingTransportTest, PeerThatNeverCallsTimesOut) {
  Ring ring(2, Options({.chunk_bytes = 64, .timeout_s = 1}));
  std::vector<float> x(1000, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = ring.rank(0).AllReduce(absl::MakeSpan(x));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(ring.address(1)));
}

TEST_P(RingTransportTest, WorksAgainAfterAFailedCall) {
  const int n = 2;
  Ring ring(n, Options({.chunk_bytes = 64, .timeout_s = 2}));
  // Call 1 fails: the ranks disagree on the size.
  std::vector<std::vector<float>> bad = {std::vector<float>(10),
                                         std::vector<float>(11)};
  std::vector<absl::Status> status = ring.Run(
      [&](int r) { return ring.rank(r).AllReduce(absl::MakeSpan(bad[r])); });
  ASSERT_FALSE(status[0].ok());
  ASSERT_FALSE(status[1].ok());
  // Call 2, with agreeing sizes, succeeds: nothing of call 1 leaks in.
  ExpectAllReduceSums(ring, RandomInputs(n, 333, 8));
}

// A mirrored job's chief interrupts the ranks that wait for a replica
// that gave the step up (#30): the waiting call ends with the abort, not
// at its deadline, later calls fail at once, and once every rank starts
// over at one epoch (a restarted rank's count is back at 0) the ring sums
// again.
TEST_P(RingTransportTest, AbortEndsAWaitingCallAndRestartRejoinsTheRing) {
  Ring ring(2, Options({.chunk_bytes = 64, .timeout_s = 120}));
  std::vector<float> x(1000, 1.0f);
  absl::Status waiting;
  std::thread caller(
      [&] { waiting = ring.rank(0).AllReduce(absl::MakeSpan(x)); });
  absl::SleepFor(absl::Milliseconds(200));
  ring.rank(0).Abort(absl::AbortedError("worker 1 gave step 7 up"));
  caller.join();
  EXPECT_TRUE(absl::IsAborted(waiting)) << waiting;
  EXPECT_THAT(std::string(waiting.message()), HasSubstr("gave step 7 up"));
  absl::Status later = ring.rank(0).AllReduce(absl::MakeSpan(x));
  EXPECT_TRUE(absl::IsAborted(later)) << later;

  absl::Status too_low = ring.rank(0).Restart(0);
  EXPECT_TRUE(absl::IsInvalidArgument(too_low)) << too_low;
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(ring.rank(r).Restart(1000).ok());
  ExpectAllReduceSums(ring, RandomInputs(2, 333, 9));
}

// Runs one all-reduce of `x` on the ranks `members` of `ring` (the ring
// as re-formed: members[i] is rank i) and checks each ends with the
// documented sum of the members' values.
void ExpectReformedSums(Ring& ring, const std::vector<int>& members,
                        std::vector<std::vector<float>> x) {
  const std::vector<float> want = RingOrderSum(x);
  std::vector<absl::Status> status = ring.Run(
      [&](int r) {
        const int i = static_cast<int>(
            std::find(members.begin(), members.end(), r) - members.begin());
        return ring.rank(r).AllReduce(absl::MakeSpan(x[i]));
      },
      members);
  for (size_t i = 0; i < members.size(); ++i) {
    ASSERT_TRUE(status[members[i]].ok())
        << "rank " << members[i] << ": " << status[members[i]];
    EXPECT_EQ(std::memcmp(x[i].data(), want.data(), want.size() * 4), 0)
        << "member " << i << " differs from the documented summation order";
  }
}

// Elastic mirrored jobs (#48): between calls the ring is re-formed with
// new members, growing from one rank (no data plane listener yet), then
// shrinking, and each ring sums its own members only.
// A worker that is stopping (#48) ends the call waiting for a peer that
// never calls, well before the deadline, with the stop; a Restart that
// comes after does not let a later call wait again.
TEST_P(RingTransportTest, ShutdownEndsAWaitingCallForGood) {
  Ring ring(2, Options({.chunk_bytes = 64, .timeout_s = 60}));
  std::vector<float> x(1000, 1.0f);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::Status waiting;
  std::thread caller(
      [&] { waiting = ring.rank(0).AllReduce(absl::MakeSpan(x)); });
  ring.rank(0).Shutdown(absl::CancelledError("worker 0 is stopping (SIGTERM)"));
  caller.join();
  EXPECT_LT(absl::Now(), deadline);
  EXPECT_TRUE(absl::IsCancelled(waiting)) << waiting;
  EXPECT_THAT(std::string(waiting.message()), HasSubstr("is stopping"));
  ASSERT_TRUE(ring.rank(0).Restart(1000).ok());
  absl::Status later = ring.rank(0).AllReduce(absl::MakeSpan(x));
  EXPECT_TRUE(absl::IsCancelled(later)) << later;
}

TEST_P(RingTransportTest, ReformGrowsAndShrinksTheRingBetweenCalls) {
  Ring ring(4, Options({.chunk_bytes = 64, .timeout_s = 30}), -1,
            /*singletons=*/true);
  std::vector<float> alone = {1, 2, 3};
  ASSERT_TRUE(ring.rank(0).AllReduce(absl::MakeSpan(alone)).ok());
  EXPECT_EQ(alone, (std::vector<float>{1, 2, 3}));
  uint64_t epoch = 100;
  auto reform = [&](const std::vector<int>& members) {
    std::vector<std::string> peers;
    for (int m : members) peers.push_back(ring.address(m));
    for (size_t i = 0; i < members.size(); ++i) {
      ASSERT_TRUE(
          ring.rank(members[i]).Reform(static_cast<int>(i), peers, epoch).ok());
    }
    epoch += 100;
  };
  for (const std::vector<int>& members : std::vector<std::vector<int>>{
           {0, 1}, {0, 1, 3}, {0, 1, 2, 3}, {3, 0}, {2, 3, 0}}) {
    SCOPED_TRACE(absl::StrJoin(members, ","));
    reform(members);
    const int n = static_cast<int>(members.size());
    ExpectReformedSums(ring, members, RandomInputs(n, 1001, 5 * n));
    ExpectReformedSums(ring, members, RandomInputs(n, 7, 5 * n + 1));
  }
  absl::Status too_low = ring.rank(0).Reform(0, {ring.address(0)}, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(too_low)) << too_low;
  absl::Status out_of_range = ring.rank(0).Reform(2, {ring.address(0)}, epoch);
  EXPECT_TRUE(absl::IsInvalidArgument(out_of_range)) << out_of_range;
}

TEST(RingAllReduceTcpTest, ChecksTheJobTokenOnTheDataPlane) {
  RingAllReduceOptions options{.chunk_bytes = 64, .timeout_s = 10};
  options.data_plane = DataPlaneKind::kTcp;
  options.security.job_token = "the-job-token";
  Ring ring(2, options);
  // The ranks, holding the token, sum over the data plane.
  ExpectAllReduceSums(ring, RandomInputs(2, 1000, 21));
  const int port = ring.rank(1).data_plane_port();
  ASSERT_GT(port, 0);
  // A process with another token is refused before any chunk moves...
  absl::StatusOr<Socket> wrong = Socket::Connect("127.0.0.1", port, 5);
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  absl::Status s = OfferDataPlaneHandshake(*wrong, "another-token");
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  // ... and so is one with none.
  absl::StatusOr<Socket> none = Socket::Connect("127.0.0.1", port, 5);
  ASSERT_TRUE(none.ok()) << none.status();
  s = OfferDataPlaneHandshake(*none, "");
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  // The ring still works afterwards.
  ExpectAllReduceSums(ring, RandomInputs(2, 333, 22));
}

TEST(RingAllReduceTcpTest, SumsOverTlsAndRefusesPlainConnections) {
  TestCertificates certs("ring_tls");
  if (certs.error()) {
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireTls)
        << "openssl could not make test certificates: " << *certs.error();
  }
  RingAllReduceOptions options{.chunk_bytes = 256, .timeout_s = 10};
  options.data_plane = DataPlaneKind::kTcp;
  options.security.job_token = "the-job-token";
  // Valid for 127.0.0.1, as a server's and as a client's certificate.
  options.security.tls = certs.Files("server", "ca");
  Ring ring(3, options);
  ExpectAllReduceSums(ring, RandomInputs(3, 5000, 31));
  // A connection without TLS hears that the rank speaks TLS, and stops.
  absl::StatusOr<Socket> plain =
      Socket::Connect("127.0.0.1", ring.rank(0).data_plane_port(), 5);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(OfferDataPlaneHandshake(*plain, "the-job-token").ok());
  ExpectAllReduceSums(ring, RandomInputs(3, 77, 32));
  // The TLS sessions are kept from call to call too.
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ring.rank(r).connections_opened(), 1);
}

// A connection and its handshake per call would cost more than a small
// buffer's transfer: each rank keeps one, and opens another only after a
// Restart (its neighbour may have restarted elsewhere).
TEST(RingAllReduceTcpTest, CallsShareOneConnectionUntilARestart) {
  RingAllReduceOptions options{.chunk_bytes = 256, .timeout_s = 10};
  options.data_plane = DataPlaneKind::kTcp;
  Ring ring(3, options);
  for (int call = 0; call < 5; ++call) {
    ExpectAllReduceSums(ring, RandomInputs(3, 100 + call, 40 + call));
  }
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ring.rank(r).connections_opened(), 1);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(ring.rank(r).Restart(1000).ok());
  }
  ExpectAllReduceSums(ring, RandomInputs(3, 50, 50));
  ExpectAllReduceSums(ring, RandomInputs(3, 60, 51));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ring.rank(r).connections_opened(), 2);
}

TEST(RingAllReduceTcpTest, GrpcOnlyRankHasNoDataPlanePort) {
  auto ring = RingAllReduce::Create(0, 2);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ((*ring)->data_plane_port(), 0);
}

}  // namespace
}  // namespace tessera
