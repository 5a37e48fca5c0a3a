#include "bench/embedding_dlrm.h"

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/rpc/grpc_channel.h"
#include "glog/logging.h"
#include "partitioners/hash_routing.h"
#include "ps_server/client/ps_client.h"

namespace tessera {
namespace {

// Rows per table of the MLPerf DLRM reference on Criteo 1TB with
// --max-ind-range=40000000 (the 26 categorical features in order).
constexpr int64_t kDlrmTableRows[] = {
    39884406, 39043,    17289,    7420,     20263,  3,     7120, 1543, 63,
    38532951, 2953546,  403346,   10,       2208,   11938, 155,  4,    976,
    14,       39979771, 25641295, 39664984, 585935, 12972, 108,  36};
constexpr int kTables = sizeof(kDlrmTableRows) / sizeof(kDlrmTableRows[0]);

std::string ShardName(int table, int shard) {
  return absl::StrCat("C", table + 1, "/part_", shard);
}

}  // namespace

std::vector<int64_t> DlrmTableRows(int64_t row_divisor) {
  std::vector<int64_t> rows(kTables);
  for (int t = 0; t < kTables; ++t) {
    rows[t] = std::max<int64_t>(1, kDlrmTableRows[t] / row_divisor);
  }
  return rows;
}

int RunDlrmTables(std::vector<ServerProcess>& servers,
                  const DlrmTablesOptions& o, DlrmTablesResult* result) {
  const int n = static_cast<int>(servers.size());
  std::vector<std::unique_ptr<PsClient>> admin = ConnectServers(servers);
  if (admin.empty()) return 1;
  const std::vector<int64_t> rows = DlrmTableRows(o.row_divisor);
  int64_t total_rows = 0;
  for (int t = 0; t < kTables; ++t) total_rows += rows[t];
  for (int i = 0; i < n; ++i) {
    CreateShardsRequest request;
    for (int t = 0; t < kTables; ++t) {
      *request.add_shards() = HashDef(absl::StrCat("C", t + 1), o.dim, i, n,
                                      rows[t] / n * 21 / 20 + 16);
    }
    *request.mutable_optimizer() = OptimizerNamed("adagrad");
    CreateShardsResponse response;
    if (absl::Status s = admin[i]->CreateShards(request, &response); !s.ok()) {
      LOG(ERROR) << s;
      return 1;
    }
  }
  std::vector<std::vector<std::unique_ptr<PsClient>>> clients(o.workers);
  for (auto& per_worker : clients) {
    for (ServerProcess& s : servers) {
      per_worker.push_back(std::make_unique<PsClient>(
          s.address, 0, MakeChannel(s.address, ChannelSecurity())));
    }
  }
  std::atomic<bool> failed{false};
  std::vector<std::atomic<int64_t>> held(n), moved(n);
  // One thread per server: pulls (and pushes) each table's routed ids.
  auto exchange = [&](int w,
                      std::vector<std::vector<std::vector<int64_t>>>&
                          routed,  // [server][table]
                      bool push) {
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        std::vector<float> values;
        for (int t = 0; t < kTables && !failed; ++t) {
          const std::vector<int64_t>& ids = routed[i][t];
          if (ids.empty()) continue;
          values.resize(ids.size() * o.dim);
          absl::Status s = clients[w][i]->PullRows(ShardName(t, i), ids, o.dim,
                                                   absl::MakeSpan(values));
          if (s.ok() && push) {
            for (float& v : values) v = 0.01f * v + 0.001f;  // some gradient
            PushResponse response;
            s = clients[w][i]->PushRows(ShardName(t, i), ids, o.dim, values,
                                        &response);
          }
          if (!s.ok()) {
            LOG(ERROR) << s;
            failed = true;
          }
          (push ? moved : held)[i] += static_cast<int64_t>(ids.size());
        }
      });
    }
    for (auto& t : threads) t.join();
  };

  // Phase 1: every row of every table.
  std::fprintf(stderr, "dlrm: creating %ld rows of dim %ld on %d servers\n",
               total_rows, o.dim, n);
  auto start = Clock::now();
  {
    std::vector<std::vector<std::vector<int64_t>>> routed(
        n, std::vector<std::vector<int64_t>>(kTables));
    constexpr int64_t kChunk = 1 << 17;
    for (int t = 0; t < kTables; ++t) {
      for (int64_t begin = 0; begin < rows[t]; begin += kChunk) {
        for (auto& per_server : routed) {
          for (auto& ids : per_server) ids.clear();
        }
        for (int64_t k = begin; k < std::min(rows[t], begin + kChunk); ++k) {
          const int64_t id = HashId(k + 1);
          routed[HashShardOf(id, n)][t].push_back(id);
        }
        exchange(0, routed, /*push=*/false);
        if (failed) return 1;
      }
    }
  }
  const double create_seconds = Seconds(start);
  std::fprintf(stderr, "dlrm: created in %.1f s; training %d steps\n",
               create_seconds, o.steps);

  // Phase 2: DLRM steps, one id per table per example, deduplicated per
  // table as a worker does; o.warmup_steps first, untimed (a disk tier
  // holds the hot rows in memory only once they have been touched).
  auto train = [&](int steps, uint64_t seed) {
    std::atomic<int> step{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < o.workers; ++w) {
      threads.emplace_back([&, w] {
        std::vector<ZipfSampler> zipf;
        for (int t = 0; t < kTables; ++t) zipf.emplace_back(rows[t], o.zipf_s);
        std::mt19937_64 rng(seed + w);
        std::vector<std::vector<std::vector<int64_t>>> routed(
            n, std::vector<std::vector<int64_t>>(kTables));
        absl::flat_hash_set<int64_t> seen;
        while (step.fetch_add(1) < steps && !failed) {
          for (int t = 0; t < kTables; ++t) {
            for (auto& per_server : routed) per_server[t].clear();
            seen.clear();
            for (int b = 0; b < o.batch; ++b) {
              const int64_t id = HashId(zipf[t](rng));
              if (seen.insert(id).second) {
                routed[HashShardOf(id, n)][t].push_back(id);
              }
            }
          }
          exchange(w, routed, /*push=*/true);
        }
      });
    }
    for (auto& t : threads) t.join();
  };
  if (o.warmup_steps > 0) {
    train(o.warmup_steps, 1000);
    for (auto& m : moved) m = 0;
  }
  start = Clock::now();
  train(o.steps, 100);
  if (failed) return 1;
  const double train_seconds = Seconds(start);

  std::printf(
      "\ndlrm: MLPerf DLRM's 26 Criteo-1TB tables (40M cap) / %ld: %ld rows "
      "of dim %ld, Adagrad hash tables over %d parameter server processes; "
      "%d steps of %d examples x 26 ids (Zipf %.2f), %d client threads\n",
      o.row_divisor, total_rows, o.dim, n, o.steps, o.batch, o.zipf_s,
      o.workers);
  std::printf("%-6s %12s %12s %10s %10s %14s %14s %10s\n", "server", "rows",
              "account_MB", "B/row", "payload_B", "pulled_rows/s",
              "pushed_rows/s", "rss_MB");
  const double payload = static_cast<double>(o.dim) * 4 * 2;
  for (int i = 0; i < n; ++i) {
    const ServerExit exit = StopServer(servers[i], *admin[i]);
    if (result != nullptr) result->servers.push_back(exit);
    const double accounted = static_cast<double>(exit.accounted_bytes);
    const double rate = moved[i].load() / train_seconds;
    std::printf("%-6d %12ld %12.1f %10.1f %10.0f %14.0f %14.0f %10.1f\n", i,
                held[i].load(), accounted / 1e6, accounted / held[i].load(),
                payload, rate, rate, exit.rss / 1e6);
  }
  std::printf(
      "rows created in %.1f s (%.2f M rows/s); %.0f examples/s over all "
      "servers\n",
      create_seconds, total_rows / create_seconds / 1e6,
      static_cast<double>(o.steps) * o.batch / train_seconds);
  if (result != nullptr) {
    result->examples_per_s =
        static_cast<double>(o.steps) * o.batch / train_seconds;
    result->rows = total_rows;
  }
  return 0;
}

}  // namespace tessera
