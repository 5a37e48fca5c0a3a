// bench_huge_table: one growing embedding table of --rows rows of --dim
// values, stored in --precision and updated by --optimizer, on the
// parameter servers --ps_hosts names (separate tessera_ps processes on this
// machine: bench/huge_table_100m.sh starts two). Issue #43's target: 100 M
// rows x dim 16, fp16, row-wise Adagrad, on 2 servers of one 24 GiB
// machine.
//
// Pass 0 creates every row, ids 0 .. rows-1, by pulling them in batches of
// --batch ids (each routed with HashShardOf, as a worker routes them);
// passes 1 .. --passes pull every row again and push a gradient for it.
// Rows and gradients travel in the table's precision (--transport=tcp: the
// data plane). A line every few seconds gives the pass's progress, rate,
// ETA and the servers' resident memory; the run stops, naming the bytes
// per row it measured, when the servers together pass --max_rss_gib, so a
// table that does not fit never takes the shared machine's memory.
//
// Checks (exit 1 when one fails): after pass 0, a sample of --sample rows
// spread over the ids is, bit for bit, the table's initial rows
// (HashRowInitialValues rounded to the precision); after the passes, each
// sampled row is what the pushes made of it: a local fp32 replica that
// applied the same gradients with the same optimizer, within one rounding
// of the precision per pass (the servers round stochastically: 2 units in
// the last place, for a value that crossed a power of two), and the
// row pulled in the table's precision is the fp32 pull's bits.
//
// Output: per pass its rows/s; per server its rows, resident memory (VmRSS
// of --ps_pids, and its growth since the start), the table's accounted
// bytes (Health), and bytes per row.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/embedding_servers.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "common/rpc/grpc_channel.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "partitioners/hash_routing.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/hash_table.h"

DEFINE_string(ps_hosts, "", "Comma-separated host:port of the servers.");
DEFINE_string(ps_pids, "",
              "Comma-separated process ids of the servers, in --ps_hosts "
              "order, whose VmRSS is read from /proc (same machine).");
DEFINE_int64(rows, 100000000, "Rows of the table, ids 0 .. rows-1.");
DEFINE_int64(dim, 16, "Values per row.");
DEFINE_string(precision, "fp16", "fp32, fp16 or bf16.");
DEFINE_string(optimizer, "rowwise_adagrad", "rowwise_adagrad or adagrad.");
DEFINE_int32(passes, 2, "Pull-and-push passes over every row after pass 0.");
DEFINE_int32(batch, 65536, "Ids per batch (all servers together).");
DEFINE_int32(threads, 4, "Client threads, each with batches of its own.");
DEFINE_int32(sample, 10000, "Rows checked after pass 0 and at the end.");
DEFINE_string(transport, "tcp", "tcp (the data plane) or grpc.");
DEFINE_double(max_rss_gib, 12,
              "Stop when the servers' VmRSS together passes this.");
DEFINE_double(progress_s, 5, "Seconds between progress lines.");

namespace tessera {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The gradient pass `pass` pushes for element e of row `id`: in
// [-0.01, 0.01], cheap, and a pure function of its arguments, so the check
// replays it.
inline float Gradient(int64_t id, int pass, int64_t e) {
  const uint64_t h = static_cast<uint64_t>(id) * 2654435761u +
                     static_cast<uint64_t>(e) * 40503u +
                     static_cast<uint64_t>(pass) * 977u;
  return 0.01f * (static_cast<float>(h & 1023) / 511.5f - 1.0f);
}

OptimizerConfig OptimizerConfigNamed(const std::string& name) {
  OptimizerConfig config;
  config.set_learning_rate(0.01f);
  if (name == "adagrad") {
    config.mutable_adagrad();
  } else {
    config.mutable_rowwise_adagrad();
  }
  return config;
}

ShardDef TableShard(int index, int num_shards, RowPrecision precision) {
  // Sized up front, so the index never doubles (and briefly holds both).
  ShardDef def = HashDef("huge", FLAGS_dim, index, num_shards,
                         FLAGS_rows / num_shards * 21 / 20);
  def.set_precision(precision);
  return def;
}

class Bench {
 public:
  Bench(std::vector<std::string> hosts, std::vector<int> pids,
        RowPrecision precision)
      : hosts_(std::move(hosts)),
        pids_(std::move(pids)),
        n_(static_cast<int>(hosts_.size())),
        precision_(precision),
        rows_per_server_(n_) {
    PsClientOptions options;
    options.data_plane =
        FLAGS_transport == "grpc" ? DataPlaneKind::kGrpc : DataPlaneKind::kTcp;
    for (int i = 0; i < n_; ++i) {
      clients_.push_back(std::make_unique<PsClient>(
          hosts_[i], i, MakeChannel(hosts_[i], ChannelSecurity()), options));
    }
  }

  int Run() {
    for (int i = 0; i < n_; ++i)
      baseline_rss_.push_back(ProcStatusBytes("VmRSS", pids_[i]));
    if (absl::Status s = Create(); !s.ok()) {
      LOG(ERROR) << s;
      return 1;
    }
    std::printf(
        "huge table: %ld rows x dim %ld, %s + %s, %d servers (%s), %s, "
        "batches of %d ids, %d client threads; %d cores\n",
        FLAGS_rows, FLAGS_dim, RowPrecisionName(precision_).c_str(),
        FLAGS_optimizer.c_str(), n_, FLAGS_ps_hosts.c_str(),
        FLAGS_transport.c_str(), FLAGS_batch, FLAGS_threads,
        static_cast<int>(std::thread::hardware_concurrency()));
    std::fflush(stdout);
    bool ok = true;
    for (int pass = 0; pass <= FLAGS_passes; ++pass) {
      if (!RunPass(pass)) {
        Report();
        return 1;
      }
      if (pass == 0) ok = CheckInitialRows() && ok;
    }
    ok = CheckTrainedRows() && ok;
    Report();
    std::printf("%s\n", ok ? "checks: passed" : "checks: FAILED");
    return ok ? 0 : 1;
  }

 private:
  absl::Status Create() {
    for (int i = 0; i < n_; ++i) {
      CreateShardsRequest request;
      *request.add_shards() = TableShard(i, n_, precision_);
      *request.mutable_optimizer() = OptimizerConfigNamed(FLAGS_optimizer);
      CreateShardsResponse response;
      if (absl::Status s = clients_[i]->CreateShards(request, &response);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  int64_t ServersRss() const {
    int64_t total = 0;
    for (int pid : pids_) total += ProcStatusBytes("VmRSS", pid);
    return total;
  }

  // Pulls (and from pass 1 on, pushes) the rows `ids` routed to server i.
  absl::Status Exchange(int i, const std::vector<int64_t>& ids, int pass,
                        std::vector<float>& values) {
    if (ids.empty()) return absl::OkStatus();
    const int64_t dim = FLAGS_dim;
    values.resize(ids.size() * dim);
    const std::string shard = ShardName(i);
    const RowsPart part{shard, dim, ids, precision_};
    const absl::Span<float> out(values);
    if (absl::Status s = clients_[i]->PullRows({&part, 1}, {&out, 1});
        !s.ok() || pass == 0) {
      return s;
    }
    for (size_t r = 0; r < ids.size(); ++r) {
      float* g = values.data() + r * dim;
      for (int64_t e = 0; e < dim; ++e) g[e] = Gradient(ids[r], pass, e);
    }
    const absl::Span<const float> grads(values);
    PushResponse response;
    return clients_[i]->PushRows({&part, 1}, {&grads, 1}, &response);
  }

  std::string ShardName(int i) const { return absl::StrCat("huge/part_", i); }

  // One pass over every id; false when it failed or memory ran over.
  bool RunPass(int pass) {
    std::atomic<int64_t> next{0}, done{0};
    std::atomic<bool> stop{false};
    std::string why;
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int w = 0; w < FLAGS_threads; ++w) {
      threads.emplace_back([&, w] {
        std::vector<std::vector<int64_t>> routed(n_);
        std::vector<float> values;
        for (int64_t begin;
             !stop && (begin = next.fetch_add(FLAGS_batch)) < FLAGS_rows;) {
          const int64_t end =
              std::min<int64_t>(FLAGS_rows, begin + FLAGS_batch);
          for (auto& r : routed) r.clear();
          for (int64_t id = begin; id < end; ++id) {
            routed[HashShardOf(id, n_)].push_back(id);
          }
          for (int i = 0; i < n_; ++i) {
            if (pass == 0) rows_per_server_[i] += routed[i].size();
            if (absl::Status s = Exchange(i, routed[i], pass, values);
                !s.ok()) {
              LOG(ERROR) << "thread " << w << ": " << s;
              stop = true;
              return;
            }
          }
          done += end - begin;
        }
      });
    }
    // Progress, and the memory guard, from this thread.
    while (true) {
      // A line every --progress_s, sooner when the pass ends.
      for (int k = 0; k < 20 && done.load() < FLAGS_rows && !stop.load(); ++k) {
        std::this_thread::sleep_for(
            std::chrono::duration<double>(FLAGS_progress_s / 20));
      }
      const int64_t d = done.load();
      const double s = Seconds(start);
      const int64_t rss = ServersRss();
      const double rate = d / std::max(s, 1e-9);
      std::printf(
          "pass %d (%s): %ld / %ld rows (%.1f%%), %.2f M rows/s, ETA %.0f s, "
          "servers' RSS %.2f GiB\n",
          pass, pass == 0 ? "create" : "pull+push", d, FLAGS_rows,
          100.0 * d / FLAGS_rows, rate / 1e6,
          rate > 0 ? (FLAGS_rows - d) / rate : 0.0, rss / kGiB);
      std::fflush(stdout);
      if (pass == 0 && rss > FLAGS_max_rss_gib * kGiB && !stop) {
        why = absl::StrCat(
            "the servers' RSS ", rss / kGiB, " GiB passed --max_rss_gib ",
            FLAGS_max_rss_gib, " at ", d,
            " rows: ", (rss - Baseline()) / std::max<int64_t>(d, 1),
            " bytes per row");
        stop = true;
      }
      if (d >= FLAGS_rows || stop) break;
    }
    for (auto& t : threads) t.join();
    const double seconds = Seconds(start);
    if (stop) {
      std::printf("pass %d stopped: %s\n", pass,
                  why.empty() ? "a call failed (see the log)" : why.c_str());
      return false;
    }
    pass_seconds_.push_back(seconds);
    std::printf("pass %d done: %ld rows in %.1f s, %.2f M rows/s\n", pass,
                FLAGS_rows, seconds, FLAGS_rows / seconds / 1e6);
    std::fflush(stdout);
    return true;
  }

  int64_t Baseline() const {
    int64_t b = 0;
    for (int64_t r : baseline_rss_) b += r;
    return b;
  }

  std::vector<int64_t> SampleIds() const {
    std::vector<int64_t> ids;
    const int64_t step = std::max<int64_t>(1, FLAGS_rows / FLAGS_sample);
    for (int64_t id = step / 2; id < FLAGS_rows; id += step) ids.push_back(id);
    return ids;
  }

  // The sample's rows pulled in `wire`, widened, in the order of `ids`.
  absl::Status PullSample(const std::vector<int64_t>& ids, RowPrecision wire,
                          std::vector<float>* out) {
    const int64_t dim = FLAGS_dim;
    out->assign(ids.size() * dim, 0.0f);
    for (int i = 0; i < n_; ++i) {
      std::vector<int64_t> mine;
      std::vector<size_t> at;
      for (size_t k = 0; k < ids.size(); ++k) {
        if (HashShardOf(ids[k], n_) == i) {
          mine.push_back(ids[k]);
          at.push_back(k);
        }
      }
      if (mine.empty()) continue;
      std::vector<float> values(mine.size() * dim);
      const std::string shard = ShardName(i);
      const RowsPart part{shard, dim, mine, wire};
      const absl::Span<float> span(values);
      if (absl::Status s = clients_[i]->PullRows({&part, 1}, {&span, 1});
          !s.ok()) {
        return s;
      }
      for (size_t k = 0; k < mine.size(); ++k) {
        std::copy_n(values.data() + k * dim, dim, out->data() + at[k] * dim);
      }
    }
    return absl::OkStatus();
  }

  // A value rounded to the table's precision to nearest, widened.
  std::vector<float> Nearest(std::vector<float> v) const {
    std::vector<uint16_t> stored(v.size());
    if (precision_ == ROW_FP32) return v;
    NarrowRowNearest(precision_, v.data(), stored.data(), v.size());
    WidenRow(precision_, stored.data(), v.data(), v.size());
    return v;
  }

  std::vector<float> InitialRow(int64_t id) const {
    const ShardDef def = TableShard(HashShardOf(id, n_), n_, precision_);
    std::vector<float> row(FLAGS_dim);
    HashRowInitialValues(def.initializer(), id, absl::MakeSpan(row));
    return Nearest(row);
  }

  bool CheckInitialRows() {
    const std::vector<int64_t> ids = SampleIds();
    std::vector<float> pulled;
    if (absl::Status s = PullSample(ids, ROW_FP32, &pulled); !s.ok()) {
      LOG(ERROR) << s;
      return false;
    }
    int64_t bad = 0;
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::vector<float> want = InitialRow(ids[k]);
      if (!std::equal(want.begin(), want.end(),
                      pulled.begin() + k * FLAGS_dim)) {
        ++bad;
      }
    }
    std::printf(
        "check after pass 0: %zu sampled rows, %ld differ from the table's "
        "initial rows (bit for bit)\n",
        ids.size(), bad);
    return bad == 0;
  }

  // The spacing of the precision's values at `x` (one unit in the last
  // place), which bounds one stochastic rounding of a value near x.
  double Ulp(double x) const {
    const int mantissa = precision_ == ROW_FP16   ? 10
                         : precision_ == ROW_BF16 ? 7
                                                  : 23;
    const double tiny = precision_ == ROW_FP16 ? std::ldexp(1.0, -24) : 0.0;
    return std::max(
        tiny,
        std::ldexp(1.0, std::ilogb(std::max(std::fabs(x), 1e-30)) - mantissa));
  }

  bool CheckTrainedRows() {
    const std::vector<int64_t> ids = SampleIds();
    std::vector<float> wide, narrow;
    absl::Status s = PullSample(ids, ROW_FP32, &wide);
    if (s.ok()) s = PullSample(ids, precision_, &narrow);
    if (!s.ok()) {
      LOG(ERROR) << s;
      return false;
    }
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
        CreateOptimizer(OptimizerConfigNamed(FLAGS_optimizer));
    CHECK(optimizer.ok()) << optimizer.status();
    const int64_t dim = FLAGS_dim;
    int64_t bad = 0, moved = 0;
    double worst = 0;  // |server - replica| / tolerance
    for (size_t k = 0; k < ids.size(); ++k) {
      std::vector<float> row = InitialRow(ids[k]);
      const std::vector<float> initial = row;
      std::vector<std::vector<float>> slots((*optimizer)->num_slots());
      std::vector<float*> slot_ptrs;
      for (int m = 0; m < (*optimizer)->num_slots(); ++m) {
        slots[m].assign((*optimizer)->slot_row_elements(m, dim),
                        (*optimizer)->slot_initial_value(m));
        slot_ptrs.push_back(slots[m].data());
      }
      std::vector<double> tolerance(dim, 0.0);
      for (int pass = 1; pass <= FLAGS_passes; ++pass) {
        std::vector<float> g(dim);
        for (int64_t e = 0; e < dim; ++e) g[e] = Gradient(ids[k], pass, e);
        g = Nearest(g);  // gradients travel in the table's precision
        (*optimizer)
            ->Apply(row.data(), g.data(), slot_ptrs.data(), dim,
                    UpdateStep(pass));
        // The server rounded a value within its previous rounding of this
        // one, possibly past a power of two: the spacing one binade up.
        for (int64_t e = 0; e < dim; ++e) tolerance[e] += 2 * Ulp(row[e]);
      }
      bool row_ok = true;
      for (int64_t e = 0; e < dim; ++e) {
        const float got = wide[k * dim + e];
        const double diff = std::fabs(double{got} - row[e]);
        worst = std::max(worst, diff / std::max(tolerance[e], 1e-30));
        if (precision_ == ROW_FP32 ? got != row[e]
                                   : diff > tolerance[e] * 1.0001) {
          row_ok = false;
        }
        if (got != narrow[k * dim + e]) row_ok = false;
        if (got != initial[e]) ++moved;
      }
      if (!row_ok && ++bad <= 3) {
        for (int64_t e = 0; e < dim; ++e) {
          std::printf(
              "  row %ld [%ld]: server %.9g (%s pull %.9g), replica %.9g, "
              "initial %.9g, tolerance %.3g\n",
              ids[k], e, wide[k * dim + e],
              RowPrecisionName(precision_).c_str(), narrow[k * dim + e], row[e],
              initial[e], tolerance[e]);
        }
      }
    }
    std::printf(
        "check after %d passes: %zu sampled rows, %ld off the fp32 replica "
        "by more than one rounding per pass or differing between fp32 and "
        "%s pulls (worst value at %.2f of its tolerance); %ld of %ld values "
        "moved from their initial value\n",
        FLAGS_passes, ids.size(), bad, RowPrecisionName(precision_).c_str(),
        worst, moved, static_cast<int64_t>(ids.size() * dim));
    return bad == 0 && (FLAGS_passes == 0 || moved > 0);
  }

  void Report() {
    std::printf("\n%-6s %12s %10s %12s %12s %12s %10s %10s\n", "server", "rows",
                "rss_GiB", "rss-start_GiB", "accounted_GB", "used_GB",
                "rss_B/row", "acct_B/row");
    int64_t rows = 0, rss_growth = 0, accounted = 0;
    for (int i = 0; i < n_; ++i) {
      HealthResponse health;
      absl::Status s = clients_[i]->Health(&health);
      const int64_t rss = ProcStatusBytes("VmRSS", pids_[i]);
      const int64_t r = rows_per_server_[i].load();
      const int64_t growth = rss - baseline_rss_[i];
      rows += r;
      rss_growth += growth;
      accounted += s.ok() ? health.resident_bytes() : 0;
      std::printf("%-6d %12ld %10.2f %12.2f %12.2f %12.2f %10.1f %10.1f\n", i,
                  r, rss / kGiB, growth / kGiB,
                  s.ok() ? health.resident_bytes() / 1e9 : -1.0,
                  s.ok() ? health.used_bytes() / 1e9 : -1.0,
                  static_cast<double>(growth) / std::max<int64_t>(r, 1),
                  s.ok() ? static_cast<double>(health.resident_bytes()) /
                               std::max<int64_t>(r, 1)
                         : -1.0);
    }
    std::printf("%-6s %12ld %10.2f %12.2f %12.2f %12s %10.1f %10.1f\n", "all",
                rows, ServersRss() / kGiB, rss_growth / kGiB, accounted / 1e9,
                "",
                static_cast<double>(rss_growth) / std::max<int64_t>(rows, 1),
                static_cast<double>(accounted) / std::max<int64_t>(rows, 1));
    for (size_t p = 0; p < pass_seconds_.size(); ++p) {
      std::printf("pass %zu (%s): %.1f s, %.2f M rows/s\n", p,
                  p == 0 ? "create" : "pull+push", pass_seconds_[p],
                  FLAGS_rows / pass_seconds_[p] / 1e6);
    }
    std::fflush(stdout);
  }

  const std::vector<std::string> hosts_;
  const std::vector<int> pids_;
  const int n_;
  const RowPrecision precision_;
  std::vector<std::unique_ptr<PsClient>> clients_;
  std::vector<std::atomic<int64_t>> rows_per_server_;
  std::vector<int64_t> baseline_rss_;
  std::vector<double> pass_seconds_;
};

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  auto usage = [](const std::string& what) {
    std::fprintf(stderr, "bench_huge_table: %s\n", what.c_str());
    return 2;
  };
  const std::vector<std::string> hosts =
      absl::StrSplit(FLAGS_ps_hosts, ',', absl::SkipEmpty());
  std::vector<int> pids;
  for (absl::string_view p :
       absl::StrSplit(FLAGS_ps_pids, ',', absl::SkipEmpty())) {
    int pid = 0;
    if (!absl::SimpleAtoi(p, &pid) || pid <= 0) {
      return usage(absl::StrCat("--ps_pids: '", p, "' is not a process id"));
    }
    pids.push_back(pid);
  }
  if (hosts.empty()) return usage("--ps_hosts names no server");
  if (pids.size() != hosts.size()) {
    return usage(absl::StrCat("--ps_pids names ", pids.size(),
                              " processes for ", hosts.size(), " servers"));
  }
  absl::StatusOr<tessera::RowPrecision> precision =
      tessera::ParseRowPrecision(FLAGS_precision);
  if (!precision.ok()) return usage(std::string(precision.status().message()));
  if (FLAGS_optimizer != "rowwise_adagrad" && FLAGS_optimizer != "adagrad") {
    return usage("--optimizer must be rowwise_adagrad or adagrad");
  }
  if (FLAGS_transport != "tcp" && FLAGS_transport != "grpc") {
    return usage("--transport must be tcp or grpc");
  }
  if (FLAGS_rows <= 0 || FLAGS_dim <= 0 || FLAGS_batch <= 0 ||
      FLAGS_threads <= 0 || FLAGS_passes < 0 || FLAGS_sample <= 0) {
    return usage(
        "--rows, --dim, --batch, --threads and --sample must be > 0, "
        "--passes >= 0");
  }
  tessera::Bench bench(hosts, pids, *precision);
  return bench.Run();
}
