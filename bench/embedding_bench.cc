// bench_embedding: sparse embedding tables on parameter servers.
//
// --mode is a comma-separated list of:
//   memory      For each --dims and optimizer (sgd, adagrad), a forked child
//               creates one hash-table shard of --mem_rows rows (by pulling
//               them) and reports its resident bytes by the table's own
//               accounting and by VmRSS (after - before), against
//               rows * dim * 4 * (1 + slots) and the 1.25 x bound.
//   throughput  One in-process parameter server on loopback, its gRPC
//               service and its TCP data plane side by side. Before
//               timing, --distinct_batches batches of --batch ids are drawn
//               from a Zipf(--zipf_s) law over --vocab ids, deduplicated
//               and sorted (as a worker does); --clients threads then loop
//               over them: PullRows the unique ids, PushRows one gradient
//               row per id (--optimizers, Adagrad by default).
//               The table plane's clients push each batch after their
//               next pull (--table_push_lags), as a plane's server sees it.
//               --server_cpus and --client_cpus put the server and its
//               clients on cores of their own.
//               Reports unique rows pulled and pushed per second, for hash
//               tables and for fixed tables (--fixed_rows rows, one lock
//               per shard) at each of --dims and --precisions (rows and
//               gradients travel in the table's precision), on each of
//               --planes (grpc, tcp, table) in the same run; and the
//               same per second of the process's CPU time (clients and
//               server), which other load on a shared machine sways less.
//   scale       --scale_servers parameter servers, each its own forked
//               process on loopback, hold one shard each of a dim-16
//               Adagrad hash table. --scale_workers client threads first
//               create --scale_rows rows (pulls of every id, routed with
//               HashShardOf), then train --scale_steps steps of
//               --scale_batch examples x --scale_features ids drawn from a
//               Zipf law over those ids: dedupe, route, pull, push. Reports
//               rows, accounted bytes and VmRSS per server, and examples/s.
//   dlrm        MLPerf DLRM's 26 tables over forked servers
//               (bench/embedding_dlrm.h).
//   table_bytes Bytes a server holds per row of a hash table and a fixed
//               shard of --table_bytes_rows rows at each of --dims: fp32 +
//               Adagrad against fp16 and bf16 + rowwise_adagrad
//               (bench/embedding_table_bytes.h).
// The default runs memory and throughput; the scale run takes ~7 GB.
//
// Progress goes to stderr, the tables to stdout. Exit status 0 unless a
// call fails.

#include <sched.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "bench/cpu_pin.h"
#include "bench/embedding_dlrm.h"
#include "bench/embedding_servers.h"
#include "bench/embedding_table_bytes.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "common/rpc/grpc_channel.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "partitioners/hash_routing.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/data_plane/dense_plane_server.h"
#include "ps_server/hash_table.h"
#include "ps_server/ps_service.h"
#include "ps_server/shard_store.h"

DEFINE_string(mode, "memory,throughput",
              "Comma-separated: memory, throughput, scale.");
DEFINE_string(dims, "16,64", "Embedding dimensions to measure.");
DEFINE_int64(mem_rows, 3000000, "Rows of the memory measurement's table.");
DEFINE_int64(vocab, 10000000, "Distinct ids the Zipf law draws from.");
DEFINE_double(zipf_s, 1.05, "Zipf exponent.");
DEFINE_int32(batch, 4096, "Ids per batch, before deduplication.");
DEFINE_int32(distinct_batches, 256,
             "Throughput runs: distinct batches the clients cycle through; "
             "their distinct ids are the table's rows (256: ~266 K rows of "
             "--vocab 10 M, a table that half fits in cache; 4096: ~2 M "
             "rows, where each lookup is a memory miss). Every row is "
             "created before timing.");
DEFINE_string(clients, "1,4", "Client threads for the throughput runs.");
DEFINE_string(planes, "grpc,tcp",
              "Planes the throughput runs' row calls travel on: grpc, tcp, or "
              "table (no transport: the clients call the server's table "
              "directly, its own ceiling).");
DEFINE_double(seconds, 5, "Timed seconds per throughput measurement.");
DEFINE_int32(rounds, 1,
             "throughput mode: measurements per case, every case taking its "
             "turn once a round, in order and then in reverse: the machine's "
             "speed drifts by 20-35% over minutes, and turns spread that "
             "drift over the cases compared instead of putting it between "
             "them. Each round's rows/s go to stderr; the table sums them.");
DEFINE_string(server_cpus, "",
              "throughput mode: cores the server's threads run on, and the "
              "table plane's clients, which do the table's work themselves; "
              "with --client_cpus, a row's cost on the server's cores is "
              "measured apart from its clients' (as with clients on other "
              "machines). Empty: any core.");
DEFINE_string(client_cpus, "",
              "throughput mode: cores the grpc and tcp planes' client "
              "threads run on; empty: any core.");
DEFINE_string(table_push_lags, "1",
              "throughput mode: the table plane's clients push the batch "
              "they pulled this many batches before (0: the one they just "
              "pulled); a list gives one table case per lag, shown as "
              "\"table\" at 1 and \"tblN\" at N. A plane's server never "
              "sees a batch's push straight after its pull: the round trip "
              "and the other clients' requests come between (in training, a "
              "whole step). At 0 every row a push touches is still in cache "
              "from its pull, a warmth no plane gives its server.");
DEFINE_string(precisions, "fp32",
              "Throughput runs: table precisions to measure (fp32, fp16, "
              "bf16); rows and gradients travel in the table's precision.");
DEFINE_string(optimizers, "adagrad",
              "Throughput runs: the tables' optimizers to measure (adagrad, "
              "rowwise_adagrad, sgd, ...).");
DEFINE_int64(fixed_rows, 1000000,
             "Rows of the fixed table in the throughput runs (Zipf ranks "
             "fold onto them); 0 skips fixed tables.");
DEFINE_int64(scale_rows, 40000000, "Rows of the scale run, in total.");
DEFINE_int32(scale_servers, 4, "Parameter servers of the scale run.");
DEFINE_int32(scale_workers, 4, "Client threads of the scale run.");
DEFINE_int32(scale_steps, 200, "Training steps of the scale run.");
DEFINE_int32(scale_batch, 512, "Examples per step of the scale run.");
DEFINE_int32(scale_features, 26, "Ids per example of the scale run.");
DEFINE_int64(dlrm_row_divisor, 100,
             "dlrm mode: MLPerf DLRM's table rows are divided by this (1: "
             "the reference's 188M rows).");
DEFINE_int64(dlrm_dim, 16, "dlrm mode: embedding dimension (reference 128).");
DEFINE_int64(table_bytes_rows, 1000000,
             "table_bytes mode: rows of each table measured.");
DEFINE_int32(dlrm_servers, 2, "dlrm mode: parameter server processes.");
DEFINE_int32(dlrm_batch, 2048, "dlrm mode: examples per step.");
DEFINE_int32(dlrm_steps, 300, "dlrm mode: training steps.");

namespace tessera {
namespace {

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t v;
    if (absl::SimpleAtoi(part, &v)) out.push_back(v);
  }
  return out;
}

bool HasMode(const std::string& mode) {
  for (absl::string_view m : absl::StrSplit(FLAGS_mode, ',')) {
    if (m == mode) return true;
  }
  return false;
}

// ---- memory ---------------------------------------------------------------

// Runs in a forked child so that every measurement starts from a fresh heap.
void MeasureMemoryChild(int64_t dim, const std::string& optimizer_name,
                        int64_t rows) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(OptimizerNamed(optimizer_name));
  CHECK(optimizer.ok()) << optimizer.status();
  const int64_t before = ProcStatusBytes("VmRSS");
  absl::StatusOr<std::unique_ptr<HashTable>> table =
      HashTable::Create(HashDef("mem", dim, 0, 1, rows), optimizer->get());
  CHECK(table.ok()) << table.status();
  std::vector<int64_t> ids(4096);
  std::vector<float> sink(ids.size() * dim);
  const auto start = Clock::now();
  for (int64_t next = 0; next < rows;) {
    ids.resize(std::min<int64_t>(4096, rows - next));
    for (int64_t& id : ids) id = HashId(++next);
    (*table)->Read(ids, sink.data());
  }
  const double seconds = Seconds(start);
  const int64_t rss = ProcStatusBytes("VmRSS") - before;
  const int slots = (*optimizer)->num_slots();
  const double payload = static_cast<double>(rows) * dim * 4 * (1 + slots);
  const int64_t accounted = (*table)->resident_bytes();
  std::printf(
      "%-8s %4ld %10ld %6ld %10.1f %10.1f %10.1f %8.3f %8.3f %8s %9.2f\n",
      optimizer_name.c_str(), dim, (*table)->rows(), (*table)->record_bytes(),
      payload / 1e6, accounted / 1e6, rss / 1e6, accounted / payload,
      rss / payload, rss <= 1.25 * payload ? "yes" : "NO",
      rows / seconds / 1e6);
  std::fflush(stdout);
}

void RunMemory(const std::vector<int64_t>& dims) {
  std::printf(
      "\nmemory: one hash-table shard of %ld rows; payload = rows x dim x 4 "
      "x (1 + slots); rss = VmRSS after - before (fresh process)\n",
      FLAGS_mem_rows);
  std::printf("%-8s %4s %10s %6s %10s %10s %10s %8s %8s %8s %9s\n", "optim",
              "dim", "rows", "rec_B", "payload_MB", "account_MB", "rss_MB",
              "acct/pl", "rss/pl", "<=1.25", "Mrows/s");
  std::fflush(stdout);
  for (int64_t dim : dims) {
    for (const char* optimizer : {"adagrad", "sgd"}) {
      const pid_t pid = fork();
      if (pid == 0) {
        MeasureMemoryChild(dim, optimizer, FLAGS_mem_rows);
        _exit(0);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        LOG(ERROR) << "memory child for dim " << dim << " failed";
      }
    }
  }
}

// ---- throughput -----------------------------------------------------------

struct Batches {
  std::vector<std::vector<int64_t>> ranks;  // Zipf ranks, --batch each
  // Each batch's table ids, deduplicated and ascending (as a worker's
  // Localize sends them), for hash and for fixed tables. Made once, so
  // that the timed seconds hold only what the table and the plane do.
  std::vector<std::vector<int64_t>> hash_ids, fixed_ids;

  const std::vector<std::vector<int64_t>>& ids(bool hash) const {
    return hash ? hash_ids : fixed_ids;
  }
};

// Appends to *ids the table ids of `ranks` not yet in *seen (hash tables:
// HashId; fixed tables: folded onto --fixed_rows), adding them to *seen.
void AppendNewIds(const std::vector<int64_t>& ranks, bool hash,
                  absl::flat_hash_set<int64_t>* seen,
                  std::vector<int64_t>* ids) {
  for (int64_t r : ranks) {
    const int64_t id = hash ? HashId(r) : (r - 1) % FLAGS_fixed_rows;
    if (seen->insert(id).second) ids->push_back(id);
  }
}

Batches MakeBatches(int count) {
  Batches b;
  ZipfSampler zipf(FLAGS_vocab, FLAGS_zipf_s);
  std::mt19937_64 rng(1);
  b.ranks.resize(count);
  for (auto& batch : b.ranks) {
    batch.resize(FLAGS_batch);
    for (int64_t& r : batch) r = zipf(rng);
  }
  for (bool hash : {true, false}) {
    std::vector<std::vector<int64_t>>& out = hash ? b.hash_ids : b.fixed_ids;
    if (!hash && FLAGS_fixed_rows <= 0) continue;
    out.resize(count);
    absl::flat_hash_set<int64_t> seen;
    for (int i = 0; i < count; ++i) {
      seen.clear();
      AppendNewIds(b.ranks[i], hash, &seen, &out[i]);
      std::sort(out[i].begin(), out[i].end());
    }
  }
  return b;
}

// One or more timed runs of a case, summed.
struct ThroughputResult {
  int64_t rows = 0, batches = 0;
  double seconds = 0;
  // This process's CPU time (clients and server together): rows per CPU
  // second say what a row costs, less swayed by other load on a shared
  // machine than rows per second.
  double cpu_seconds = 0;
  // With --server_cpus: the seconds those cores were busy, the server's
  // (and the kernel's work for it) apart from its clients'.
  double server_cpu_seconds = 0;

  void Add(const ThroughputResult& other) {
    rows += other.rows;
    batches += other.batches;
    seconds += other.seconds;
    cpu_seconds += other.cpu_seconds;
    server_cpu_seconds += other.server_cpu_seconds;
  }
  double rows_per_s() const { return seconds > 0 ? rows / seconds : 0; }
  double batches_per_s() const { return seconds > 0 ? batches / seconds : 0; }
  double unique_per_batch() const {
    return batches > 0 ? static_cast<double>(rows) / batches : 0;
  }
  double rows_per_cpu_s() const {
    return cpu_seconds > 0 ? rows / cpu_seconds : 0;
  }
  double rows_per_server_cpu_s() const {
    return server_cpu_seconds > 0 ? rows / server_cpu_seconds : 0;
  }
};

// CPU seconds this process has used, all its threads.
double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

// Clients pull and push deduplicated batches of `table` until the time is
// up; the first second is a warm-up.
// With `direct` set, the clients call its Read and Apply themselves,
// without any transport: the table's own ceiling on this machine.
absl::StatusOr<ThroughputResult> RunClients(
    const std::string& address, DataPlaneKind plane, RowTable* direct,
    int push_lag, const std::string& table, bool hash, int64_t dim,
    RowPrecision precision, int clients, const Batches& batches) {
  std::atomic<bool> timing{false}, stop{false};
  std::atomic<int64_t> rows{0}, done{0};
  std::vector<absl::Status> errors(clients);
  const std::vector<std::vector<int64_t>>& all_ids = batches.ids(hash);
  // One constant gradient for every push, filled once: a fill per batch
  // ran on the table plane's (the server's) core and counted against it.
  size_t most_ids = 0;
  for (const std::vector<int64_t>& ids : all_ids) {
    most_ids = std::max(most_ids, ids.size());
  }
  const std::vector<float> gradient(most_ids * dim, 0.01f);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      // The table plane's clients do the table's own work.
      if (absl::Status s = direct != nullptr
                               ? PinTo(FLAGS_server_cpus, "server_cpus")
                               : PinTo(FLAGS_client_cpus, "client_cpus");
          !s.ok()) {
        errors[c] = s;
        stop = true;
        return;
      }
      PsClientOptions options;
      options.data_plane = plane;
      PsClient client(address, 0, MakeChannel(address, ChannelSecurity()),
                      options);
      std::vector<float> values;
      PushResponse response;
      for (size_t i = c * 7; !stop.load(); ++i) {
        const std::vector<int64_t>& ids = all_ids[i % all_ids.size()];
        values.resize(ids.size() * dim);
        absl::Status s;
        if (direct != nullptr) {
          direct->Read(ids, values.data());
          const std::vector<int64_t>& pushed =
              all_ids[(i + all_ids.size() - push_lag) % all_ids.size()];
          direct->Apply(pushed, absl::MakeConstSpan(gradient.data(),
                                                    pushed.size() * dim));
        } else {
          // As a worker sends them: rows and gradients in the table's
          // precision.
          const RowsPart part{table, dim, ids, precision};
          const absl::Span<float> out = absl::MakeSpan(values);
          s = client.PullRows({&part, 1}, {&out, 1});
          if (s.ok()) {
            const absl::Span<const float> in =
                absl::MakeConstSpan(gradient.data(), values.size());
            s = client.PushRows({&part, 1}, {&in, 1}, &response);
          }
        }
        if (!s.ok()) {
          errors[c] = s;
          stop = true;
          return;
        }
        if (timing.load()) {
          rows += static_cast<int64_t>(ids.size());
          ++done;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  timing = true;
  const auto start = Clock::now();
  const double cpu_start = ProcessCpuSeconds();
  const double server_cpu_start = CoresBusySeconds(FLAGS_server_cpus);
  std::this_thread::sleep_for(std::chrono::duration<double>(FLAGS_seconds));
  timing = false;
  const double seconds = Seconds(start);
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  const double server_cpu_seconds =
      CoresBusySeconds(FLAGS_server_cpus) - server_cpu_start;
  stop = true;
  for (auto& t : threads) t.join();
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }
  ThroughputResult r;
  r.rows = rows.load();
  r.batches = done.load();
  r.seconds = seconds;
  r.cpu_seconds = cpu_seconds;
  r.server_cpu_seconds = server_cpu_seconds;
  return r;
}

// Creates every row the batches name, so that each plane's timed seconds
// find the same full table (a large --distinct_batches would otherwise
// spend them creating rows).
absl::Status Prefill(ShardStore& store, const std::string& shard, bool hash,
                     int64_t dim, const Batches& batches) {
  absl::StatusOr<std::shared_ptr<RowTable>> table = store.FindRows(shard);
  if (!table.ok()) return table.status();
  const auto start = Clock::now();
  absl::flat_hash_set<int64_t> seen;
  std::vector<int64_t> ids;
  std::vector<float> values;
  for (const auto& ranks : batches.ranks) {
    ids.clear();
    AppendNewIds(ranks, hash, &seen, &ids);
    if (ids.empty()) continue;
    std::sort(ids.begin(), ids.end());
    values.resize(ids.size() * dim);
    (*table)->Read(ids, values.data());
  }
  LOG(INFO) << shard << ": " << seen.size() << " rows created in "
            << Seconds(start) << " s before timing";
  return absl::OkStatus();
}

int RunThroughput(const std::vector<int64_t>& dims) {
  // The server's threads take the mask of the thread that starts them;
  // this thread goes back to every core afterwards.
  cpu_set_t all;
  sched_getaffinity(0, sizeof(all), &all);
  for (const auto& [cpus, flag] :
       {std::pair{&FLAGS_client_cpus, "client_cpus"},
        std::pair{&FLAGS_server_cpus, "server_cpus"}}) {
    if (absl::Status s = PinTo(*cpus, flag); !s.ok()) {
      LOG(ERROR) << s;
      return 1;
    }
  }
  ShardStore store;
  PsServiceOptions options;
  PsCore core(&store);
  ParameterServerService service(&core, options);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    LOG(ERROR) << "could not start the server";
    return 1;
  }
  DensePlaneServerOptions plane_options;
  plane_options.host = "127.0.0.1";
  absl::StatusOr<std::unique_ptr<DensePlaneServer>> plane =
      DensePlaneServer::Start(&core, plane_options);
  if (!plane.ok()) {
    LOG(ERROR) << "could not start the data plane: " << plane.status();
    return 1;
  }
  sched_setaffinity(0, sizeof(all), &all);
  // nullopt: no transport (the "table" plane).
  std::vector<std::optional<DataPlaneKind>> planes;
  for (absl::string_view name : absl::StrSplit(FLAGS_planes, ',')) {
    if (name == "table") {
      planes.push_back(std::nullopt);
      continue;
    }
    absl::StatusOr<DataPlaneKind> kind = ParseDataPlaneKind(std::string(name));
    if (!kind.ok()) {
      LOG(ERROR) << "--planes: \"" << name
                 << "\" is not one of grpc, tcp, table";
      return 1;
    }
    planes.push_back(*kind);
  }
  const std::string address = absl::StrCat("127.0.0.1:", port);
  std::vector<int64_t> lags;
  for (absl::string_view text :
       absl::StrSplit(FLAGS_table_push_lags, ',', absl::SkipEmpty())) {
    int64_t lag = -1;
    if (!absl::SimpleAtoi(text, &lag) || lag < 0 ||
        lag >= FLAGS_distinct_batches) {
      LOG(ERROR) << "--table_push_lags: \"" << text
                 << "\" is not a whole number at least 0 and below "
                    "--distinct_batches ("
                 << FLAGS_distinct_batches << ")";
      return 1;
    }
    lags.push_back(lag);
  }
  const Batches batches = MakeBatches(FLAGS_distinct_batches);
  std::printf(
      "\nthroughput: 1 server on loopback, Adagrad, batches of %d Zipf(%.2f) "
      "ids over %ld ids, deduplicated, then PullRows + PushRows; rows/s = "
      "unique rows pulled and pushed per second (%u cores here)\n",
      FLAGS_batch, FLAGS_zipf_s, FLAGS_vocab,
      std::thread::hardware_concurrency());
  if (!FLAGS_server_cpus.empty() || !FLAGS_client_cpus.empty()) {
    std::printf(
        "server (and the table plane's clients) on cores %s, grpc and tcp "
        "clients on cores %s\n",
        FLAGS_server_cpus.empty() ? "any" : FLAGS_server_cpus.c_str(),
        FLAGS_client_cpus.empty() ? "any" : FLAGS_client_cpus.c_str());
  }
  // rows/srv_cpu_s: rows per second of the --server_cpus cores' busy time.
  std::printf("%-6s %4s %-20s %7s %5s %10s %10s %12s %12s %12s %12s %10s\n",
              "table", "dim", "precision+optimizer", "clients", "plane",
              "uniq/batch", "batches/s", "rows/s", "rows/cpu_s",
              "rows/srv_cpu_s", "table_rows", "resid_MB");
  std::fflush(stdout);
  PsClient admin(address, 0, MakeChannel(address, ChannelSecurity()));
  // Every table is made and filled first, so that the rounds below take
  // the cases in turn.
  struct Case {
    const char* kind;
    bool hash;
    int64_t dim;
    std::string config;
    RowPrecision precision;
    std::string shard;
    int64_t clients;
    std::optional<DataPlaneKind> plane;
    int push_lag = 0;  // the table plane's
  };
  std::vector<Case> cases;
  for (const char* kind : {"hash", "fixed"}) {
    const bool hash = std::string(kind) == "hash";
    if (!hash && FLAGS_fixed_rows <= 0) continue;
    for (int64_t dim : dims) {
      for (absl::string_view precision_name :
           absl::StrSplit(FLAGS_precisions, ',', absl::SkipEmpty())) {
        absl::StatusOr<RowPrecision> precision =
            ParseRowPrecision(precision_name);
        if (!precision.ok()) {
          LOG(ERROR) << "--precisions: " << precision.status();
          return 1;
        }
        for (absl::string_view optimizer :
             absl::StrSplit(FLAGS_optimizers, ',', absl::SkipEmpty())) {
          const std::string config =
              absl::StrCat(precision_name, "+", optimizer);
          const std::string variable =
              absl::StrCat(kind, "_", dim, "_", precision_name, "_", optimizer);
          CreateShardsRequest request;
          if (hash) {
            *request.add_shards() = HashDef(variable, dim, 0, 1, 0);
          } else {
            ShardDef def = HashDef(variable, dim, 0, 1, 0);
            def.set_hash_table(false);
            def.set_dim(0);
            def.set_num_shards(0);
            def.mutable_variable_shape()->add_dims(FLAGS_fixed_rows);
            def.mutable_variable_shape()->add_dims(dim);
            *def.mutable_shape() = def.variable_shape();
            *request.add_shards() = def;
          }
          request.mutable_shards(0)->set_precision(*precision);
          *request.mutable_optimizer() = OptimizerNamed(std::string(optimizer));
          CreateShardsResponse created;
          if (absl::Status s = admin.CreateShards(request, &created); !s.ok()) {
            LOG(ERROR) << s;
            return 1;
          }
          const std::string shard = request.shards(0).name();
          if (absl::Status s = Prefill(store, shard, hash, dim, batches);
              !s.ok()) {
            LOG(ERROR) << s;
            return 1;
          }
          for (int64_t clients : ParseList(FLAGS_clients)) {
            for (const std::optional<DataPlaneKind>& plane_kind : planes) {
              if (plane_kind.has_value()) {
                cases.push_back({kind, hash, dim, config, *precision, shard,
                                 clients, plane_kind});
                continue;
              }
              for (int64_t lag : lags) {
                cases.push_back({kind, hash, dim, config, *precision, shard,
                                 clients, plane_kind, static_cast<int>(lag)});
              }
            }
          }
        }
      }
    }
  }
  auto plane_name = [](const Case& c) -> std::string {
    if (c.plane.has_value()) return DataPlaneName(*c.plane);
    return c.push_lag == 1 ? "table" : absl::StrCat("tbl", c.push_lag);
  };
  std::vector<ThroughputResult> sums(cases.size());
  for (int round = 0; round < FLAGS_rounds; ++round) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const size_t turn = round % 2 == 0 ? k : cases.size() - 1 - k;
      const Case& c = cases[turn];
      absl::StatusOr<std::shared_ptr<RowTable>> table = store.FindRows(c.shard);
      if (!table.ok()) {
        LOG(ERROR) << table.status();
        return 1;
      }
      absl::StatusOr<ThroughputResult> r =
          RunClients(address, c.plane.value_or(DataPlaneKind::kGrpc),
                     c.plane.has_value() ? nullptr : table->get(), c.push_lag,
                     c.shard, c.hash, c.dim, c.precision, c.clients, batches);
      if (!r.ok()) {
        LOG(ERROR) << r.status();
        return 1;
      }
      sums[turn].Add(*r);
      if (FLAGS_rounds > 1) {
        std::fprintf(stderr, "round %d of %d: %s %ld %s %ld %s %.0f rows/s\n",
                     round + 1, FLAGS_rounds, c.kind, c.dim, c.config.c_str(),
                     c.clients, plane_name(c).c_str(), r->rows_per_s());
      }
    }
  }
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const ThroughputResult& r = sums[k];
    absl::StatusOr<std::shared_ptr<RowTable>> table = store.FindRows(c.shard);
    if (!table.ok()) {
      LOG(ERROR) << table.status();
      return 1;
    }
    const int64_t table_rows =
        c.hash ? static_cast<HashTable&>(**table).rows() : FLAGS_fixed_rows;
    std::printf(
        "%-6s %4ld %-20s %7ld %5s %10.0f %10.1f %12.0f %12.0f %12s %12ld "
        "%10.1f\n",
        c.kind, c.dim, c.config.c_str(), c.clients, plane_name(c).c_str(),
        r.unique_per_batch(), r.batches_per_s(), r.rows_per_s(),
        r.rows_per_cpu_s(),
        FLAGS_server_cpus.empty()
            ? "-"
            : absl::StrFormat("%.0f", r.rows_per_server_cpu_s()).c_str(),
        table_rows, (*table)->resident_bytes() / 1e6);
  }
  std::fflush(stdout);
  plane->reset();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}

// ---- scale ----------------------------------------------------------------
int RunScale(std::vector<ServerProcess>& servers) {
  const int n = static_cast<int>(servers.size());
  std::vector<std::unique_ptr<PsClient>> admin = ConnectServers(servers);
  if (admin.empty()) return 1;
  constexpr int64_t kDim = 16;
  const int64_t rows = FLAGS_scale_rows;
  for (int i = 0; i < n; ++i) {
    CreateShardsRequest request;
    *request.add_shards() = HashDef("scale", kDim, i, n, rows / n * 21 / 20);
    *request.mutable_optimizer() = OptimizerNamed("adagrad");
    CreateShardsResponse response;
    if (absl::Status s = admin[i]->CreateShards(request, &response); !s.ok()) {
      LOG(ERROR) << s;
      return 1;
    }
  }
  const int workers = FLAGS_scale_workers;
  std::vector<std::vector<std::unique_ptr<PsClient>>> clients(workers);
  for (auto& per_worker : clients) {
    for (ServerProcess& s : servers) {
      per_worker.push_back(std::make_unique<PsClient>(
          s.address, 0, MakeChannel(s.address, ChannelSecurity())));
    }
  }
  std::vector<std::atomic<int64_t>> rows_per_server(n);
  std::atomic<bool> failed{false};
  // Pulls (or pushes) the routed ids of one worker, server by server, in
  // parallel threads so that all servers work at once.
  auto exchange = [&](int w, std::vector<std::vector<int64_t>>& routed,
                      bool push) {
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      if (routed[i].empty()) continue;
      threads.emplace_back([&, i] {
        std::vector<float> values(routed[i].size() * kDim);
        absl::Status s =
            clients[w][i]->PullRows(absl::StrCat("scale/part_", i), routed[i],
                                    kDim, absl::MakeSpan(values));
        if (s.ok() && push) {
          for (float& v : values) v = 0.01f * v + 0.001f;  // some gradient
          PushResponse response;
          s = clients[w][i]->PushRows(absl::StrCat("scale/part_", i), routed[i],
                                      kDim, values, &response);
        }
        if (!s.ok()) {
          LOG(ERROR) << s;
          failed = true;
        }
      });
    }
    for (auto& t : threads) t.join();
  };

  // Phase 1: create every row.
  std::fprintf(stderr, "scale: creating %ld rows on %d servers\n", rows, n);
  std::atomic<int64_t> next{0};
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<std::vector<int64_t>> routed(n);
      constexpr int64_t kChunk = 1 << 16;
      for (int64_t begin; (begin = next.fetch_add(kChunk)) < rows;) {
        for (auto& r : routed) r.clear();
        for (int64_t k = begin; k < std::min(rows, begin + kChunk); ++k) {
          const int64_t id = HashId(k + 1);
          routed[HashShardOf(id, n)].push_back(id);
        }
        for (int i = 0; i < n; ++i) rows_per_server[i] += routed[i].size();
        exchange(w, routed, /*push=*/false);
        if (failed) return;
      }
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  if (failed) return 1;
  const double create_seconds = Seconds(start);
  std::fprintf(stderr, "scale: created in %.1f s; training\n", create_seconds);

  // Phase 2: train a fixed number of steps.
  std::atomic<int> step{0};
  std::atomic<int64_t> unique_ids{0};
  start = Clock::now();
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      ZipfSampler zipf(rows, FLAGS_zipf_s);
      std::mt19937_64 rng(100 + w);
      std::vector<std::vector<int64_t>> routed(n);
      absl::flat_hash_set<int64_t> seen;
      while (step.fetch_add(1) < FLAGS_scale_steps && !failed) {
        for (auto& r : routed) r.clear();
        seen.clear();
        const int64_t draws = int64_t{FLAGS_scale_batch} * FLAGS_scale_features;
        for (int64_t d = 0; d < draws; ++d) {
          const int64_t id = HashId(zipf(rng));
          if (seen.insert(id).second) routed[HashShardOf(id, n)].push_back(id);
        }
        unique_ids += static_cast<int64_t>(seen.size());
        exchange(w, routed, /*push=*/true);
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failed) return 1;
  const double train_seconds = Seconds(start);

  std::printf(
      "\nscale: %d parameter server processes, one dim-%ld Adagrad hash-table "
      "shard each; bound = 1.25 x rows x dim x 4 x 2\n",
      n, kDim);
  std::printf("%-6s %12s %12s %12s %12s %12s %10s %8s\n", "server", "rows",
              "account_MB", "rss_MB", "rss-idle_MB", "peak_rss_MB", "bound_MB",
              "rss/pl");
  int64_t total_rows = 0;
  for (int i = 0; i < n; ++i) {
    const ServerExit exit = StopServer(servers[i], *admin[i]);
    const int64_t r = rows_per_server[i].load();
    total_rows += r;
    const double payload = static_cast<double>(r) * kDim * 4 * 2;
    std::printf("%-6d %12ld %12.1f %12.1f %12.1f %12.1f %10.1f %8.3f\n", i, r,
                exit.accounted_bytes >= 0 ? exit.accounted_bytes / 1e6 : -1.0,
                exit.rss / 1e6, (exit.rss - servers[i].baseline_rss) / 1e6,
                exit.hwm / 1e6, 1.25 * payload / 1e6,
                (exit.rss - servers[i].baseline_rss) / payload);
  }
  const double examples =
      static_cast<double>(FLAGS_scale_steps) * FLAGS_scale_batch;
  std::printf(
      "total rows %ld (created in %.1f s, %.2f M rows/s); %d steps x %d "
      "examples x %d ids (%.0f unique ids/step) with %d workers in %.1f s: "
      "%.0f examples/s, %.0f rows pulled+pushed/s\n",
      total_rows, create_seconds, total_rows / create_seconds / 1e6,
      FLAGS_scale_steps, FLAGS_scale_batch, FLAGS_scale_features,
      unique_ids.load() / double(FLAGS_scale_steps), workers, train_seconds,
      examples / train_seconds, unique_ids.load() / train_seconds);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  // As tessera_ps runs (common/process/process_start.cc): without the
  // debugging check of every lock order that Debian's Abseil makes.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::vector<int64_t> dims = tessera::ParseList(FLAGS_dims);
  // Children first: fork() before this process starts gRPC.
  if (tessera::HasMode("memory")) tessera::RunMemory(dims);
  int table_bytes_rc = 0;
  if (tessera::HasMode("table_bytes")) {
    table_bytes_rc = tessera::RunTableBytes(dims, FLAGS_table_bytes_rows);
  }
  std::vector<tessera::ServerProcess> scale_servers;
  if (tessera::HasMode("scale")) {
    for (int i = 0; i < FLAGS_scale_servers; ++i) {
      scale_servers.push_back(tessera::ForkServer());
    }
  }
  std::vector<tessera::ServerProcess> dlrm_servers;
  if (tessera::HasMode("dlrm")) {
    for (int i = 0; i < FLAGS_dlrm_servers; ++i) {
      dlrm_servers.push_back(tessera::ForkServer());
    }
  }
  int rc = table_bytes_rc;
  if (tessera::HasMode("throughput")) rc |= tessera::RunThroughput(dims);
  if (!scale_servers.empty()) rc |= tessera::RunScale(scale_servers);
  if (!dlrm_servers.empty()) {
    tessera::DlrmTablesOptions options;
    options.row_divisor = std::max<int64_t>(1, FLAGS_dlrm_row_divisor);
    options.dim = FLAGS_dlrm_dim;
    options.batch = FLAGS_dlrm_batch;
    options.steps = FLAGS_dlrm_steps;
    options.zipf_s = FLAGS_zipf_s;
    rc |= tessera::RunDlrmTables(dlrm_servers, options);
  }
  return rc;
}
