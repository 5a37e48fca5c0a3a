// bench_disk_tier: MLPerf DLRM's 26 tables (bench_embedding --mode=dlrm)
// on 2 forked parameter servers, twice in one run: every row in memory,
// then with a --row_memory_budget of 1/--table_multiple of what a server
// holds in memory, so most rows live in the disk tier (RocksDB) and come
// back when a Zipf(--zipf_s) step touches them. Reports DLRM examples/s of
// table traffic for both, their ratio against the 0.5x target, and each
// tiered server's resident memory against budget + 15% (issue #43 item 6).
// The tiers go under --disk_root (default $TMPDIR or /tmp).
//
// Progress goes to stderr, the tables to stdout. Exit status 0 unless a
// call fails.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/embedding_dlrm.h"
#include "bench/embedding_servers.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_int64(row_divisor, 20,
             "MLPerf DLRM's 26 table sizes (40M cap) divided by this");
DEFINE_int64(dim, 16, "embedding dim");
DEFINE_int32(batch, 2048, "examples per step");
DEFINE_int32(steps, 300, "timed steps per run");
DEFINE_int32(warmup_steps, 100,
             "untimed steps per run before them (the tier's hot set fills)");
DEFINE_int32(workers, 2, "client threads");
DEFINE_double(zipf_s, 1.05, "Zipf exponent of each table's ids");
DEFINE_double(table_multiple, 4, "a server's rows in memory / its row budget");
DEFINE_string(disk_root, "", "where the disk tiers go; empty: $TMPDIR, /tmp");

namespace tessera {
namespace {

constexpr int kServers = 2;

int Run() {
  // Each server's rows in memory, by the layout's arithmetic (a hash
  // table's record and index entry, Adagrad), for the budget: the servers
  // must be forked before any gRPC use, so before a run could measure it.
  absl::StatusOr<std::unique_ptr<Optimizer>> adagrad =
      CreateOptimizer(OptimizerNamed("adagrad"));
  CHECK(adagrad.ok()) << adagrad.status();
  const TableRowBytes per_row =
      RowBytesOf(ROW_FP32, FLAGS_dim, **adagrad, /*growing=*/true);
  int64_t rows = 0;
  for (int64_t r : DlrmTableRows(FLAGS_row_divisor)) rows += r;
  const int64_t per_server = rows / kServers * per_row.total();
  const int64_t budget = static_cast<int64_t>(static_cast<double>(per_server) /
                                              FLAGS_table_multiple);
  const char* tmp = std::getenv("TMPDIR");
  const std::string root =
      absl::StrCat(FLAGS_disk_root.empty()
                       ? std::string(tmp != nullptr && *tmp ? tmp : "/tmp")
                       : FLAGS_disk_root,
                   "/bench_disk_tier.", getpid());
  std::vector<ServerProcess> in_memory, tiered;
  for (int i = 0; i < kServers; ++i) in_memory.push_back(ForkServer());
  for (int i = 0; i < kServers; ++i) {
    tiered.push_back(ForkServer(budget, absl::StrCat(root, "/ps-", i)));
  }

  DlrmTablesOptions options;
  options.row_divisor = FLAGS_row_divisor;
  options.dim = FLAGS_dim;
  options.batch = FLAGS_batch;
  options.steps = FLAGS_steps;
  options.warmup_steps = FLAGS_warmup_steps;
  options.workers = FLAGS_workers;
  options.zipf_s = FLAGS_zipf_s;
  DlrmTablesResult memory_result, tiered_result;
  std::fprintf(stderr, "disk tier: every row in memory\n");
  if (RunDlrmTables(in_memory, options, &memory_result) != 0) return 1;
  std::fprintf(stderr, "disk tier: %.1f MB of rows in memory per server\n",
               budget / 1e6);
  const int status = RunDlrmTables(tiered, options, &tiered_result);
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  if (status != 0) return 1;

  std::printf(
      "\ndisk tier: %ld rows of dim %ld (fp32, Adagrad) over %d servers, "
      "%.1f MB per server in memory by the layout; budget %.1f MB per "
      "server (1/%.1f), tiers in RocksDB under %s\n",
      rows, FLAGS_dim, kServers, per_server / 1e6, budget / 1e6,
      FLAGS_table_multiple, root.c_str());
  std::printf("%-10s %6s %12s %12s %10s %10s %12s %10s\n", "run", "server",
              "examples/s", "account_MB", "rss_MB", "hwm_MB", "budget_MB",
              "rss/budget");
  for (int i = 0; i < kServers; ++i) {
    const ServerExit& m = memory_result.servers[i];
    std::printf("%-10s %6d %12.0f %12.1f %10.1f %10.1f %12s %10s\n",
                "in-memory", i, memory_result.examples_per_s,
                m.accounted_bytes / 1e6, m.rss / 1e6, m.hwm / 1e6, "-", "-");
  }
  bool within = true;
  for (int i = 0; i < kServers; ++i) {
    const ServerExit& t = tiered_result.servers[i];
    within = within && t.hwm <= budget * 115 / 100;
    std::printf("%-10s %6d %12.0f %12.1f %10.1f %10.1f %12.1f %9.2fx\n",
                "tiered", i, tiered_result.examples_per_s,
                t.accounted_bytes / 1e6, t.rss / 1e6, t.hwm / 1e6, budget / 1e6,
                static_cast<double>(t.hwm) / budget);
  }
  const double ratio =
      tiered_result.examples_per_s / memory_result.examples_per_s;
  std::printf(
      "tiered / in-memory examples/s: %.2fx (target >= 0.5x); tiered peak "
      "resident memory %s budget + 15%%\n",
      ratio, within ? "within" : "NOT within");
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  return tessera::Run();
}
