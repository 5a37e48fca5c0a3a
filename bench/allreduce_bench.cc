// bench_allreduce: the ring all-reduce over gRPC or the TCP data plane
// (--data_plane; worker/collective/ring_allreduce.h) of 4 to 256 MiB across 2
// and 4 ranks in this process, each rank with its own gRPC server on 127.0.0.1
// and its own thread, beside a raw TCP transfer of the same size measured in
// the same run (bench/tcp_reference.h, one Push of the whole buffer).
//
// For every (ranks, size): --warmup untimed calls, then --reps timed
// calls; a call's time runs from starting every rank to the last one
// returning. The table shows the median:
//
//   algbw = bytes / time
//   busbw = 2 (n - 1) / n x bytes / time   (what each rank's link carries;
//           NCCL's convention, comparable across n)
//   tcp   = bytes / time of one raw TCP push of the same bytes
//
// All ranks share this machine's cores, so busbw also pays for the
// reductions and every rank's copies; the ratio busbw / tcp says what the
// ring keeps of the bare link. Progress goes to stderr, the table to
// stdout. The exit status is 0 unless a call fails or a sum is wrong.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "bench/bench_main.h"
#include "bench/tcp_reference.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/process/process_start.h"
#include "common/rpc/grpc_channel.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "worker/collective/ring_allreduce.h"

DEFINE_string(sizes_mb, "4,16,64,256", "Buffer sizes in MiB, comma-separated.");
DEFINE_string(ranks, "2,4", "Numbers of ranks, comma-separated.");
DEFINE_int32(reps, 3, "Timed calls per (ranks, size); the median is shown.");
DEFINE_int32(warmup, 1, "Untimed calls before the timed ones.");
DEFINE_string(data_plane, "tcp",
              "What carries the ring's chunks: grpc (Collective.Exchange "
              "streams) or tcp (data plane connections).");

namespace tessera {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

absl::StatusOr<std::vector<int64_t>> ParseList(const std::string& flag,
                                               const char* name, int64_t lo,
                                               int64_t hi) {
  std::vector<int64_t> out;
  for (absl::string_view piece :
       absl::StrSplit(flag, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(piece, &v) || v < lo || v > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": \"", piece, "\" is not an integer in [",
                       lo, ", ", hi, "]"));
    }
    out.push_back(v);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is empty"));
  }
  return out;
}

RingAllReduceOptions Options(DataPlaneKind data_plane) {
  RingAllReduceOptions options;
  options.data_plane = data_plane;
  return options;
}

// n ranks, each with its own server on 127.0.0.1 (an ephemeral port).
class LoopbackRing {
 public:
  static absl::StatusOr<std::unique_ptr<LoopbackRing>> Start(
      int n, DataPlaneKind data_plane) {
    auto ring = std::unique_ptr<LoopbackRing>(new LoopbackRing);
    std::vector<std::string> peers;
    for (int r = 0; r < n; ++r) {
      absl::StatusOr<std::unique_ptr<RingAllReduce>> rank =
          RingAllReduce::Create(r, n, Options(data_plane));
      if (!rank.ok()) return rank.status();
      int port = 0;
      grpc::ServerBuilder builder;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                               &port);
      ConfigureServerBuilder(&builder);
      (*rank)->RegisterService(&builder);
      std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
      if (server == nullptr || port == 0) {
        return absl::UnavailableError("cannot start a server on 127.0.0.1");
      }
      ring->ranks_.push_back(*std::move(rank));
      ring->servers_.push_back(std::move(server));
      peers.push_back(absl::StrCat("127.0.0.1:", port));
    }
    for (auto& rank : ring->ranks_) {
      if (absl::Status s = rank->SetPeers(peers); !s.ok()) return s;
    }
    return ring;
  }

  ~LoopbackRing() {
    for (auto& server : servers_) {
      server->Shutdown(std::chrono::system_clock::now() +
                       std::chrono::seconds(1));
      server->Wait();
    }
  }

  // One all-reduce on every rank at once; returns the wall time.
  absl::StatusOr<double> AllReduce(std::vector<std::vector<float>>* buffers) {
    const int n = static_cast<int>(ranks_.size());
    std::vector<absl::Status> status(n);
    std::vector<std::thread> threads;
    const Clock::time_point start = Clock::now();
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        status[r] = ranks_[r]->AllReduce(absl::MakeSpan((*buffers)[r]));
      });
    }
    for (std::thread& t : threads) t.join();
    const double seconds = SecondsSince(start);
    for (int r = 0; r < n; ++r) {
      if (!status[r].ok()) return status[r];
    }
    return seconds;
  }

 private:
  LoopbackRing() = default;
  std::vector<std::unique_ptr<RingAllReduce>> ranks_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
};

struct Row {
  int ranks = 0;
  int64_t bytes = 0;
  double seconds = 0;  // median all-reduce
  double tcp_seconds = 0;
};

absl::Status Run() {
  absl::StatusOr<std::vector<int64_t>> sizes_mb =
      ParseList(FLAGS_sizes_mb, "sizes_mb", 1, 4096);
  if (!sizes_mb.ok()) return sizes_mb.status();
  absl::StatusOr<std::vector<int64_t>> ranks =
      ParseList(FLAGS_ranks, "ranks", 2, 16);
  if (!ranks.ok()) return ranks.status();
  absl::StatusOr<DataPlaneKind> data_plane =
      ParseDataPlaneKind(FLAGS_data_plane);
  if (!data_plane.ok()) return data_plane.status();
  if (FLAGS_reps < 1 || FLAGS_warmup < 0) {
    return absl::InvalidArgumentError("--reps must be >= 1, --warmup >= 0");
  }
  const int64_t max_bytes =
      *std::max_element(sizes_mb->begin(), sizes_mb->end()) * kMiB;
  absl::StatusOr<std::unique_ptr<bench::TcpReference>> tcp =
      bench::TcpReference::Start(max_bytes);
  if (!tcp.ok()) return tcp.status();

  std::vector<Row> rows;
  const Clock::time_point bench_start = Clock::now();
  for (int64_t n : *ranks) {
    absl::StatusOr<std::unique_ptr<LoopbackRing>> ring =
        LoopbackRing::Start(static_cast<int>(n), *data_plane);
    if (!ring.ok()) return ring.status();
    for (int64_t mb : *sizes_mb) {
      const int64_t bytes = mb * kMiB;
      const int64_t elements = bytes / static_cast<int64_t>(sizeof(float));
      // Every rank holds its rank + 1, so one call must give n(n+1)/2.
      std::vector<std::vector<float>> buffers;
      for (int r = 0; r < n; ++r) {
        buffers.emplace_back(elements, static_cast<float>(r + 1));
      }
      Row row{static_cast<int>(n), bytes, 0, 0};
      std::vector<double> times, tcp_times;
      for (int rep = 0; rep < FLAGS_warmup + FLAGS_reps; ++rep) {
        absl::StatusOr<double> seconds = (*ring)->AllReduce(&buffers);
        if (!seconds.ok()) return seconds.status();
        if (rep == 0) {
          const float want = static_cast<float>(n * (n + 1) / 2);
          for (int r = 0; r < n; ++r) {
            for (int64_t i : {int64_t{0}, elements / 2, elements - 1}) {
              if (buffers[r][i] != want) {
                return absl::InternalError(
                    absl::StrCat("rank ", r, " element ", i, " is ",
                                 buffers[r][i], ", the sum is ", want));
              }
            }
          }
        }
        const Clock::time_point tcp_start = Clock::now();
        if (absl::Status s = (*tcp)->Push(bytes); !s.ok()) return s;
        const double tcp_seconds = SecondsSince(tcp_start);
        if (rep >= FLAGS_warmup) {
          times.push_back(*seconds);
          tcp_times.push_back(tcp_seconds);
        }
        std::fprintf(stderr,
                     "[%6.1f s] %lld ranks, %lld MiB, %s %d: all-reduce "
                     "%.1f ms, tcp %.1f ms\n",
                     SecondsSince(bench_start), static_cast<long long>(n),
                     static_cast<long long>(mb),
                     rep < FLAGS_warmup ? "warm-up" : "rep",
                     rep < FLAGS_warmup ? rep + 1 : rep - FLAGS_warmup + 1,
                     *seconds * 1e3, tcp_seconds * 1e3);
      }
      row.seconds = Median(times);
      row.tcp_seconds = Median(tcp_times);
      rows.push_back(row);
    }
  }

  std::printf(
      "\nring all-reduce over %s on loopback (chunks of %lld bytes), "
      "median of %d; GB/s = 1e9 bytes/s\n\n",
      DataPlaneName(*data_plane), static_cast<long long>(FLAGS_chunk_bytes),
      FLAGS_reps);
  std::printf("%5s %8s %10s %8s %8s %10s %8s %8s\n", "ranks", "MiB", "time ms",
              "algbw", "busbw", "tcp ms", "tcp", "bus/tcp");
  for (const Row& row : rows) {
    const double algbw = row.bytes / row.seconds / 1e9;
    const double busbw = 2.0 * (row.ranks - 1) / row.ranks * algbw;
    const double tcp = row.bytes / row.tcp_seconds / 1e9;
    std::printf("%5d %8lld %10.1f %8.2f %8.2f %10.1f %8.2f %8.2f\n", row.ranks,
                static_cast<long long>(row.bytes / kMiB), row.seconds * 1e3,
                algbw, busbw, row.tcp_seconds * 1e3, tcp, busbw / tcp);
  }
  std::printf("\ntotal %.0f s on %u hardware threads\n",
              SecondsSince(bench_start), std::thread::hardware_concurrency());
  return absl::OkStatus();
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::BenchMain(
      argc, argv, "bench_allreduce",
      "bench_allreduce: ring all-reduce over gRPC across in-process ranks on "
      "loopback, beside raw TCP. Flags: --sizes_mb, --ranks, --reps, "
      "--warmup, --chunk_bytes.",
      tessera::Run);
}
