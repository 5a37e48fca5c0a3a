// bench/connections: one parameter server's TCP data plane against N
// client connections (issue #46). The server runs in a child process of
// its own (this binary with --serve), so its threads, resident memory and
// CPU time read from /proc/<pid> are the server's alone. The parent opens
// N connections, half dense (a pull, then a push, of one dense shard) and
// half rows (a pull, then a push, of random rows of one table), and sends
// requests at a set total rate, open loop: request j is due at j / rate
// seconds whatever the replies, and its latency counts from when it was
// due, so a server that falls behind shows it in the tail.
//
//   bench_connections --connections=64,256,1024 --planes=threads,events
//
// prints one line per plane and N: the server's threads and resident
// memory with every connection open (the larger of before and after the
// timed part), its CPU per request, p50/p99 latency, rows/s and dense
// MB/s.

#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_main.h"
#include "bench/cpu_pin.h"
#include "common/data_plane/descriptor_limit.h"
#include "ps_server/client/dense_plane_client.h"
#include "ps_server/client/row_plane_client.h"
#include "ps_server/data_plane/dense_plane_server.h"
#include "ps_server/ps_core.h"
#include "ps_server/shard_store.h"

DEFINE_string(connections, "64,256,1024",
              "client connections to open, one run each");
DEFINE_string(planes, "threads,events",
              "server planes to compare: threads (a thread per connection) "
              "and events (a fixed pool over epoll)");
DEFINE_double(rate, 2000,
              "requests per second, all connections together; 0: as many "
              "as the client threads get answered (closed loop, each thread "
              "sending its next request when its last is answered), the "
              "server's throughput");
DEFINE_double(seconds, 5, "how long each run sends at --rate");
DEFINE_int32(rounds, 1,
             "runs per plane and N, every (N, plane) pair taking turns (A B, "
             "then B A, ...): the machine's speed drifts by 20-35% over "
             "minutes, and turns spread that drift over every pair instead "
             "of putting it between them; each round's ratio goes to "
             "stderr, and the table sums the rounds");
DEFINE_int32(client_threads, 16,
             "threads driving the connections (each connection belongs to "
             "one; --connections must be multiples of it)");
DEFINE_int32(server_threads, 0, "the events plane's pool; 0: one per core");
DEFINE_bool(rows_first, false,
            "the events plane serves row requests ahead of dense ones");
DEFINE_int32(small_per_large, 2,
             "with --rows_first: row requests served per dense one while both "
             "wait");
DEFINE_int64(dense_floats, 16384,
             "floats of the dense shard pulled and pushed");
DEFINE_int64(table_rows, 100000, "rows of the embedding table");
DEFINE_int64(row_dim, 16, "floats per row");
DEFINE_int64(rows_per_request, 64, "rows per row pull or push");
DEFINE_string(server_cpus, "",
              "cores the server process runs on (e.g. 0); empty: any. With "
              "--client_cpus, the server and the 16 client threads do not "
              "contend for the same cores, as on a cluster where workers "
              "run on other machines: then a plane's throughput is its own, "
              "not its share of the scheduler (a thread per connection "
              "has 98 threads against 16 client threads; the pool 2)");
DEFINE_string(client_cpus, "", "cores the client threads run on; empty: any");
DEFINE_string(serve, "",
              "internal: run the server half with this plane, print its "
              "port, and stop when stdin closes");

namespace tessera {
namespace {

constexpr char kDense[] = "dense/part_0";
constexpr char kTable[] = "emb/part_0";

absl::StatusOr<DataPlaneServing> ParseServing(const std::string& name) {
  if (name == "threads") return DataPlaneServing::kThreadPerConnection;
  if (name == "events") return DataPlaneServing::kEventPool;
  return absl::InvalidArgumentError(
      absl::StrCat("--planes: \"", name, "\" is not one of threads, events"));
}

ShardDef Def(const std::string& variable, int64_t rows, int64_t dim) {
  ShardDef def;
  def.set_name(absl::StrCat(variable, "/part_0"));
  def.set_variable(variable);
  def.set_index(0);
  def.set_dtype(DT_FLOAT);
  def.mutable_initializer()->set_kind(Initializer::ZEROS);
  def.mutable_variable_shape()->add_dims(rows);
  def.mutable_variable_shape()->add_dims(dim);
  def.mutable_shape()->add_dims(rows);
  def.mutable_shape()->add_dims(dim);
  return def;
}

// The child: a parameter server's data plane until stdin closes.
absl::Status Serve(const std::string& plane) {
  if (absl::Status s = PinTo(FLAGS_server_cpus, "server_cpus"); !s.ok()) {
    return s;
  }
  absl::StatusOr<DataPlaneServing> serving = ParseServing(plane);
  if (!serving.ok()) return serving.status();
  absl::StatusOr<DescriptorLimit> limit = RaiseDescriptorLimit();
  if (!limit.ok()) return limit.status();
  ShardStore store;
  PsCore core(&store);
  CreateShardsRequest request;
  *request.add_shards() = Def("dense", 1, FLAGS_dense_floats);
  *request.add_shards() = Def("emb", FLAGS_table_rows, FLAGS_row_dim);
  request.mutable_optimizer()->set_learning_rate(0.01f);
  request.mutable_optimizer()->mutable_sgd();
  CreateShardsResponse response;
  if (absl::Status s = store.Create(request, &response); !s.ok()) return s;
  DensePlaneServerOptions options;
  options.host = "127.0.0.1";
  options.serving = *serving;
  options.threads = FLAGS_server_threads;
  options.rows_first = FLAGS_rows_first;
  options.small_per_large = FLAGS_small_per_large;
  absl::StatusOr<std::unique_ptr<DensePlaneServer>> server =
      DensePlaneServer::Start(&core, options);
  if (!server.ok()) return server.status();
  std::printf("%d\n", (*server)->port());
  std::fflush(stdout);
  char byte;
  while (read(0, &byte, 1) > 0) {
  }
  return absl::OkStatus();
}

struct ServerProcess {
  pid_t pid = -1;
  int to_child = -1;  // closing it stops the child
  int port = 0;
};

absl::StatusOr<ServerProcess> SpawnServer(const std::string& plane) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) {
    return absl::InternalError("bench_connections: no pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, in[1]);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<std::string> args = {
      "/proc/self/exe",
      absl::StrCat("--serve=", plane),
      absl::StrCat("--server_threads=", FLAGS_server_threads),
      absl::StrCat("--small_per_large=", FLAGS_small_per_large),
      absl::StrCat("--rows_first=", FLAGS_rows_first ? "true" : "false"),
      absl::StrCat("--server_cpus=", FLAGS_server_cpus),
      absl::StrCat("--dense_floats=", FLAGS_dense_floats),
      absl::StrCat("--table_rows=", FLAGS_table_rows),
      absl::StrCat("--row_dim=", FLAGS_row_dim)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ServerProcess child;
  const int rc = posix_spawn(&child.pid, "/proc/self/exe", &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(
        "bench_connections: cannot start the server: ", std::strerror(rc)));
  }
  child.to_child = in[1];
  std::string line;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  close(out[0]);
  if (!absl::SimpleAtoi(line, &child.port) || child.port <= 0) {
    return absl::InternalError("bench_connections: the server did not start");
  }
  return child;
}

void StopServer(ServerProcess& child) {
  close(child.to_child);
  int status = 0;
  waitpid(child.pid, &status, 0);
}

struct ProcSample {
  int threads = 0;
  int64_t rss_kib = 0;
  double cpu_s = 0;
};

ProcSample Sample(pid_t pid) {
  ProcSample s;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    std::vector<std::string> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() < 2) continue;
    if (f[0] == "Threads:") (void)absl::SimpleAtoi(f[1], &s.threads);
    if (f[0] == "VmRSS:") (void)absl::SimpleAtoi(f[1], &s.rss_kib);
  }
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string all((std::istreambuf_iterator<char>(stat)),
                  std::istreambuf_iterator<char>());
  // Fields after the command's closing parenthesis; utime and stime are
  // the 14th and 15th of the line, the 12th and 13th after it.
  const size_t close = all.rfind(')');
  if (close != std::string::npos) {
    std::vector<std::string> f =
        absl::StrSplit(all.substr(close + 2), ' ', absl::SkipEmpty());
    int64_t utime = 0, stime = 0;
    if (f.size() > 12 && absl::SimpleAtoi(f[11], &utime) &&
        absl::SimpleAtoi(f[12], &stime)) {
      s.cpu_s = static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
    }
  }
  return s;
}

// One connection's client: dense or rows, one call at a time, so its pool
// holds exactly one connection.
struct Slot {
  std::unique_ptr<DensePlaneClient> dense;
  std::unique_ptr<RowPlaneClient> rows;
  int64_t calls = 0;
};

// What a client thread reuses from call to call.
struct Buffers {
  std::vector<float> dense;
  std::vector<float> dense_grad;
  std::vector<int64_t> ids;
  std::vector<float> rows;
  std::vector<float> row_grad;
  std::mt19937_64 rng;
};

absl::Status Call(Slot& slot, Buffers& b, int64_t* rows, int64_t* bytes) {
  const bool pull = slot.calls++ % 2 == 0;
  if (slot.dense != nullptr) {
    const std::vector<std::string> names = {kDense};
    *bytes += FLAGS_dense_floats * static_cast<int64_t>(sizeof(float));
    if (pull) {
      std::vector<int64_t> versions;
      const std::vector<absl::Span<float>> out = {absl::MakeSpan(b.dense)};
      return slot.dense->PullDense(names, out, &versions);
    }
    const std::vector<absl::Span<const float>> grads = {
        absl::MakeConstSpan(b.dense_grad)};
    const std::vector<int64_t> base = {0};
    PushResponse response;
    return slot.dense->PushDense(names, grads, base, &response, nullptr);
  }
  std::uniform_int_distribution<int64_t> id(0, FLAGS_table_rows - 1);
  for (int64_t& v : b.ids) v = id(b.rng);
  *rows += FLAGS_rows_per_request;
  const std::vector<RowsPart> parts = {{kTable, FLAGS_row_dim, b.ids}};
  if (pull) {
    const std::vector<absl::Span<float>> out = {absl::MakeSpan(b.rows)};
    return slot.rows->PullRows(parts, out);
  }
  const std::vector<absl::Span<const float>> grads = {
      absl::MakeConstSpan(b.row_grad)};
  PushResponse response;
  return slot.rows->PushRows(parts, grads, &response);
}

Buffers MakeBuffers(int seed) {
  Buffers b;
  b.dense.resize(FLAGS_dense_floats);
  b.dense_grad.assign(FLAGS_dense_floats, 1e-6f);
  b.ids.resize(FLAGS_rows_per_request);
  b.rows.resize(FLAGS_rows_per_request * FLAGS_row_dim);
  b.row_grad.assign(FLAGS_rows_per_request * FLAGS_row_dim, 1e-6f);
  b.rng.seed(seed);
  return b;
}

// One or more runs of a plane at one N, summed.
struct RunResult {
  int threads = 0;      // the server's, the most seen
  int64_t rss_kib = 0;  // the server's, the most seen
  double cpu_s = 0;     // the server's, during the timed parts
  std::vector<double> latencies_ms;
  int64_t rows = 0;
  int64_t bytes = 0;
  double elapsed_s = 0;
  int64_t errors = 0;

  void Add(const RunResult& other) {
    threads = std::max(threads, other.threads);
    rss_kib = std::max(rss_kib, other.rss_kib);
    cpu_s += other.cpu_s;
    latencies_ms.insert(latencies_ms.end(), other.latencies_ms.begin(),
                        other.latencies_ms.end());
    rows += other.rows;
    bytes += other.bytes;
    elapsed_s += other.elapsed_s;
    errors += other.errors;
  }
  int64_t requests() const { return static_cast<int64_t>(latencies_ms.size()); }
  // The q-th percentile of the latencies (sorts them, once).
  double Percentile(int q) {
    if (latencies_ms.empty()) return 0;
    if (!std::is_sorted(latencies_ms.begin(), latencies_ms.end())) {
      std::sort(latencies_ms.begin(), latencies_ms.end());
    }
    return latencies_ms[std::min(latencies_ms.size() - 1,
                                 latencies_ms.size() * q / 100)];
  }
  double rows_per_s() const { return elapsed_s > 0 ? rows / elapsed_s : 0; }
  double dense_mb_per_s() const {
    return elapsed_s > 0 ? bytes / elapsed_s / 1e6 : 0;
  }
};

absl::StatusOr<RunResult> RunOne(const std::string& plane, int n) {
  absl::StatusOr<ServerProcess> child = SpawnServer(plane);
  if (!child.ok()) return child.status();
  const int port = child->port;
  std::vector<Slot> slots(n);
  for (int i = 0; i < n; ++i) {
    PlaneConnectionOptions options;
    options.host = "127.0.0.1";
    options.resolve_port = [port]() -> absl::StatusOr<int> { return port; };
    options.timeout_s = 60;
    options.peer = absl::StrCat("bench connection ", i);
    if (i % 2 == 0) {
      slots[i].dense = std::make_unique<DensePlaneClient>(options);
    } else {
      slots[i].rows = std::make_unique<RowPlaneClient>(options);
    }
  }
  const int threads = FLAGS_client_threads;
  std::vector<Buffers> buffers;
  for (int t = 0; t < threads; ++t) buffers.push_back(MakeBuffers(t + 1));
  // Open every connection and take it through a pull and a push before
  // timing, so the timed part is every connection's steady state: with
  // the first push of each connection timed, 1,024 connections counted
  // 1,024 first pushes in 10,000 requests (a tenth) and 64 only 64.
  std::atomic<int64_t> errors{0};
  {
    std::vector<std::thread> openers;
    for (int t = 0; t < threads; ++t) {
      openers.emplace_back([&, t] {
        int64_t rows = 0, bytes = 0;
        for (int i = t; i < n; i += threads) {
          for (int call = 0; call < 2; ++call) {
            absl::Status s = Call(slots[i], buffers[t], &rows, &bytes);
            if (!s.ok()) {
              if (errors.fetch_add(1) == 0) LOG(WARNING) << s;
            }
          }
        }
      });
    }
    for (std::thread& t : openers) t.join();
  }
  if (errors.load() > 0) {
    StopServer(*child);
    return absl::UnavailableError(absl::StrCat(
        errors.load(), " of ", n, " connections could not be opened"));
  }
  const ProcSample open = Sample(child->pid);
  const bool open_loop = FLAGS_rate > 0;
  const int64_t total = open_loop
                            ? static_cast<int64_t>(FLAGS_rate * FLAGS_seconds)
                            : std::numeric_limits<int64_t>::max();
  std::vector<std::vector<double>> latencies(threads);
  std::vector<int64_t> rows(threads, 0), bytes(threads, 0);
  const auto start =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  const auto end =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(FLAGS_seconds));
  std::vector<std::thread> drivers;
  for (int t = 0; t < threads; ++t) {
    drivers.emplace_back([&, t] {
      if (open_loop) latencies[t].reserve(total / threads + 1);
      // Closed loop: thread t takes its connections in turn.
      int64_t turn = 0;
      std::this_thread::sleep_until(start);
      for (int64_t j = t; j < total; j += threads) {
        auto due = start;
        if (open_loop) {
          due += std::chrono::nanoseconds(
              static_cast<int64_t>(j * 1e9 / FLAGS_rate));
          std::this_thread::sleep_until(due);
        } else {
          due = std::chrono::steady_clock::now();
          if (due >= end) break;
        }
        const int slot = open_loop
                             ? static_cast<int>(j % n)
                             : static_cast<int>((t + threads * turn++) % n);
        absl::Status s = Call(slots[slot], buffers[t], &rows[t], &bytes[t]);
        if (!s.ok() && errors.fetch_add(1) == 0) LOG(WARNING) << s;
        latencies[t].push_back(std::chrono::duration<double, std::milli>(
                                   std::chrono::steady_clock::now() - due)
                                   .count());
      }
    });
  }
  for (std::thread& t : drivers) t.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const ProcSample after = Sample(child->pid);
  slots.clear();  // closes the connections
  StopServer(*child);

  RunResult result;
  result.threads = std::max(open.threads, after.threads);
  result.rss_kib = std::max(open.rss_kib, after.rss_kib);
  result.cpu_s = after.cpu_s - open.cpu_s;
  for (auto& l : latencies) {
    result.latencies_ms.insert(result.latencies_ms.end(), l.begin(), l.end());
  }
  for (int t = 0; t < threads; ++t) {
    result.rows += rows[t];
    result.bytes += bytes[t];
  }
  result.elapsed_s = elapsed;
  result.errors = errors.load();
  return result;
}

// A flag out of range, a user error: main exits 2 on it.
absl::Status CheckFlags() {
  if (FLAGS_client_threads < 1 || FLAGS_rate < 0 || FLAGS_seconds <= 0 ||
      FLAGS_dense_floats < 1 || FLAGS_table_rows < 1 || FLAGS_row_dim < 1 ||
      FLAGS_rows_per_request < 1) {
    return absl::InvalidArgumentError(
        "--client_threads, --seconds, --dense_floats, --table_rows, "
        "--row_dim and --rows_per_request must be positive, --rate >= 0");
  }
  if (FLAGS_rounds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rounds must be at least 1, not ", FLAGS_rounds));
  }
  if (FLAGS_small_per_large < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--small_per_large must be at least 1, not ", FLAGS_small_per_large));
  }
  return absl::OkStatus();
}

absl::Status Run() {
  if (!FLAGS_serve.empty()) return Serve(FLAGS_serve);
  std::vector<int> ns;
  for (absl::string_view s : absl::StrSplit(FLAGS_connections, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < FLAGS_client_threads ||
        n % FLAGS_client_threads != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--connections: \"", s,
                       "\" is not a positive multiple of "
                       "--client_threads (",
                       FLAGS_client_threads, ")"));
    }
    ns.push_back(n);
  }
  std::vector<std::string> planes = absl::StrSplit(FLAGS_planes, ',');
  for (const std::string& p : planes) {
    if (absl::Status s = ParseServing(p).status(); !s.ok()) return s;
  }
  // Checked here, so a bad list fails before any server starts.
  cpu_set_t all;
  sched_getaffinity(0, sizeof(all), &all);
  if (absl::Status s = PinTo(FLAGS_server_cpus, "server_cpus"); !s.ok()) {
    return s;
  }
  sched_setaffinity(0, sizeof(all), &all);
  if (absl::Status s = PinTo(FLAGS_client_cpus, "client_cpus"); !s.ok()) {
    return s;
  }
  absl::StatusOr<DescriptorLimit> limit = RaiseDescriptorLimit();
  if (!limit.ok()) return limit.status();
  if (!FLAGS_server_cpus.empty() || !FLAGS_client_cpus.empty()) {
    std::printf("server on cores %s, clients on cores %s\n",
                FLAGS_server_cpus.empty() ? "any" : FLAGS_server_cpus.c_str(),
                FLAGS_client_cpus.empty() ? "any" : FLAGS_client_cpus.c_str());
  }
  std::printf(
      "bench_connections: %g requests/s in all (0: closed loop) for %g s "
      "per run, %d client "
      "threads; half the connections dense (%lld floats), half rows (%lld "
      "rows of %lld), each alternating pull and push; %d round(s) per "
      "plane, taking turns; %ld cores; "
      "RLIMIT_NOFILE %llu\n\n",
      FLAGS_rate, FLAGS_seconds, FLAGS_client_threads,
      static_cast<long long>(FLAGS_dense_floats),
      static_cast<long long>(FLAGS_rows_per_request),
      static_cast<long long>(FLAGS_row_dim), FLAGS_rounds,
      sysconf(_SC_NPROCESSORS_ONLN),
      static_cast<unsigned long long>(limit->soft));
  std::printf(
      "| plane | connections | server threads | server RSS MiB | CPU "
      "us/request "
      "| p50 ms | p99 ms | requests/s | rows/s | dense MB/s | errors |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  // Every (N, plane) pair once a round, in order, then in reverse (A B,
  // then B A): a drift that is linear over two rounds falls on every pair
  // alike, for the planes' ratio and for the N's.
  const size_t pairs = ns.size() * planes.size();
  std::vector<RunResult> sums(pairs);
  std::vector<std::string> failed(pairs);
  for (int round = 0; round < FLAGS_rounds; ++round) {
    std::vector<RunResult> this_round(pairs);
    for (size_t k = 0; k < pairs; ++k) {
      const size_t p = round % 2 == 0 ? k : pairs - 1 - k;
      if (!failed[p].empty()) continue;
      absl::StatusOr<RunResult> r =
          RunOne(planes[p % planes.size()], ns[p / planes.size()]);
      if (!r.ok()) {
        failed[p] = std::string(r.status().message());
        continue;
      }
      this_round[p] = *r;
      sums[p].Add(*r);
    }
    if (FLAGS_rounds == 1 || planes.size() < 2) continue;
    for (size_t j = 0; j < ns.size(); ++j) {
      const size_t first = j * planes.size(), last = first + planes.size() - 1;
      if (!failed[first].empty() || !failed[last].empty()) continue;
      RunResult& a = this_round[first];
      RunResult& b = this_round[last];
      std::fprintf(
          stderr,
          "round %d of %d, %d connections: %s/%s rows/s %.0f/%.0f = %.2f, "
          "dense MB/s %.1f/%.1f = %.2f, p99 ms %.2f/%.2f\n",
          round + 1, FLAGS_rounds, ns[j], planes.back().c_str(),
          planes[0].c_str(), b.rows_per_s(), a.rows_per_s(),
          a.rows_per_s() > 0 ? b.rows_per_s() / a.rows_per_s() : 0,
          b.dense_mb_per_s(), a.dense_mb_per_s(),
          a.dense_mb_per_s() > 0 ? b.dense_mb_per_s() / a.dense_mb_per_s() : 0,
          b.Percentile(99), a.Percentile(99));
    }
  }
  for (size_t p = 0; p < pairs; ++p) {
    const std::string& plane = planes[p % planes.size()];
    const int n = ns[p / planes.size()];
    if (!failed[p].empty()) {
      std::printf("| %s | %d | failed: %s |\n", plane.c_str(), n,
                  failed[p].c_str());
      continue;
    }
    RunResult& r = sums[p];
    const double p50 = r.Percentile(50);
    const double p99 = r.Percentile(99);
    const double cpu_per_request_us =
        r.requests() > 0 ? r.cpu_s * 1e6 / r.requests() : 0;
    std::printf(
        "| %s | %d | %d | %.1f | %.1f | %.2f | %.2f | %.0f | %.0f | %.1f | "
        "%lld |\n",
        plane.c_str(), n, r.threads, r.rss_kib / 1024.0, cpu_per_request_us,
        p50, p99, r.elapsed_s > 0 ? r.requests() / r.elapsed_s : 0,
        r.rows_per_s(), r.dense_mb_per_s(), static_cast<long long>(r.errors));
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  return tessera::BenchMain(
      argc, argv, "bench_connections",
      "bench_connections --connections=64,256,1024 --planes=threads,events",
      [] {
        if (absl::Status s = tessera::CheckFlags(); !s.ok()) {
          std::fprintf(stderr, "bench_connections: error: %s\n",
                       s.ToString().c_str());
          std::exit(2);
        }
        return tessera::Run();
      });
}
