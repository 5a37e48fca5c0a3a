// bench_transport: dense push and pull between a worker-side PsClient and
// one in-process parameter server over loopback, against a plain TCP
// socket moving the same bytes in the same run.
//
// For every size (--sizes_mb, MiB) the server holds one float32 shard of
// that many bytes (ZEROS, SGD with a tiny learning rate, so every push is
// really applied). Each round times, after a warm-up, a number of
// repetitions of: PushDense and PullDense through PsClient over the TCP
// data plane ("tcp-plane", ps_server/data_plane/) and over gRPC
// ("tessera grpc"), and the same transfers on a raw TCP socket ("tcp"),
// each also as a push followed by a pull ("PP", the round trip of a step;
// for raw TCP that is an echo of the payload). The table shows the median
// over --rounds rounds in GB/s (1e9 bytes of payload per second; PP counts
// the payload once) and tcp-plane / TCP. Target: a ratio of at least 0.9
// for push and pull at 16 and 64 MiB, and for PP at 16 MiB. The target is
// reported, not enforced: the exit status is 0 unless a call fails (or a
// push was not applied).
//
// A second reference, "grpc", makes the same calls with nothing done with
// the bytes (bench/grpc_floor.h): gRPC's own ceiling on this machine, so
// the table separates what gRPC costs from what Tessera costs.
//
// With --tls (the default), the data plane is timed over TLS too
// ("tcp-plane TLS": a second data plane server on the same shards, with
// the --tls_* files or, without them, a throwaway CA and certificate made
// by the openssl command), to show what encryption costs; the line before
// the table says whether the kernel (kTLS) or OpenSSL encrypts.
//
// A third table times, without any transport, a plain memcpy (this
// machine's memory bandwidth), the server's per-chunk copy + finiteness
// check, and the SGD update a push ends with. "tcp then sgd" is the most a
// push can reach while the update runs after the last byte arrived, even
// were the bytes to move at TCP speed.
//
// Progress (one line per measurement, with the process's CPU use in cores)
// goes to stderr, the tables to stdout. --grpc_args adds channel arguments
// on both ends for tuning experiments.
//
// Across two hosts or network namespaces (bench/transport_netns.sh): one
// process runs the server half with --serve=ADDR:PORT (gRPC on PORT, the
// raw TCP reference on PORT+1, the data plane on PORT+2, its TLS twin on
// PORT+3) until one client has come and gone, the other the same table
// with --connect=ADDR:PORT, so every column, raw TCP included, crosses the
// same link. Give both the same --sizes_mb, --chunk_bytes and --grpc_args,
// and for TLS the same --tls_* files (a certificate for ADDR).

#include <sys/resource.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "bench/bench_main.h"
#include "bench/grpc_floor.h"
#include "bench/tcp_reference.h"
#include "bench/transport_server.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"
#include "common/optimizer/optimizers.h"
#include "common/process/process_start.h"
#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/transport_limits.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "ps_server/client/dense_plane_client.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/gradient_check.h"

DEFINE_string(sizes_mb, "1,16,64",
              "Comma-separated payload sizes in MiB (fractions allowed).");
DEFINE_int32(rounds, 3, "Rounds per size; the median round is reported.");
DEFINE_double(reps_scale, 1.0,
              "Multiplies the repetitions per round (1 MiB: 200, 16 MiB: 30, "
              "64 MiB: 10; in general 480 MiB / size, within [10, 200]).");
DEFINE_int32(warmup, 3, "Untimed repetitions before each timed measurement.");
DEFINE_string(grpc_args, "",
              "Tuning experiments: extra integer channel arguments "
              "(name=value,...) set on both the client channel and the "
              "server on top of tessera's own. Empty: the channel is exactly "
              "tessera::MakeChannel's.");
DEFINE_string(only, "",
              "Profiling: run only the measurements whose name contains this "
              "text (\"tessera push\", \"tcp\", \"local\", ...); the "
              "others read 0 in the tables.");
DEFINE_bool(tls, true,
            "Also time the data plane over TLS (\"tcp-plane TLS\"), with "
            "the --tls_* files or else a throwaway CA and certificate made "
            "by the openssl command.");
DEFINE_string(serve, "",
              "ADDR:PORT (IPv4): run only the server half, listening on "
              "ports PORT to PORT+3 of ADDR, until one --connect client has "
              "come and gone.");
DEFINE_string(connect, "",
              "ADDR:PORT: run only the client half, against a --serve "
              "process there (e.g. in another network namespace).");
DEFINE_int32(tcp_socket_buffer_bytes, 0,
             "SO_SNDBUF/SO_RCVBUF of the TCP reference's sockets; 0 keeps "
             "the system defaults (autotuned).");

namespace tessera {
namespace {

constexpr double kTargetRatio = 0.9;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr float kGradient = 1.0f;
constexpr float kLearningRate = 1e-6f;

struct Size {
  int64_t bytes = 0;
  std::string label;  // "16 MiB"
  std::string shard;
  int reps = 0;
};

// Medians over rounds, GB/s.
struct Row {
  double push = 0, tcp_push = 0, pull = 0, tcp_pull = 0;
  double plane_push = 0, plane_pull = 0, plane_pp = 0, tcp_pp = 0;
  double tls_push = 0, tls_pull = 0, tls_pp = 0;  // the plane over TLS
  double grpc_push = 0, grpc_pull = 0;            // gRPC with nothing done
  // No transport: one memcpy of the payload between two large buffers, and
  // the server's own work on a push: copy + finiteness check per chunk as
  // it arrives, then the SGD update of the whole shard.
  double memcpy = 0, copy_check = 0, sgd = 0;
};

absl::StatusOr<std::vector<Size>> ParseSizes(const std::string& flag) {
  std::vector<Size> sizes;
  for (absl::string_view piece :
       absl::StrSplit(flag, ',', absl::SkipWhitespace())) {
    piece = absl::StripAsciiWhitespace(piece);
    double mb = 0;
    if (!absl::SimpleAtod(piece, &mb) || !(mb > 0) || mb > 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sizes_mb: bad size \"", piece, "\""));
    }
    Size s;
    // Whole floats: the shard is {bytes / 4}.
    s.bytes = std::max<int64_t>(sizeof(float),
                                static_cast<int64_t>(std::llround(mb * kMiB)) /
                                    sizeof(float) * sizeof(float));
    s.label = absl::StrCat(piece, " MiB");
    s.shard = absl::StrCat("bench_transport/", s.bytes, "B/part_0");
    const double base = std::clamp(480.0 * kMiB / s.bytes, 10.0, 200.0);
    s.reps =
        std::max(1, static_cast<int>(std::lround(base * FLAGS_reps_scale)));
    for (const Size& other : sizes) {
      if (other.bytes == s.bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("--sizes_mb: ", piece, " given twice"));
      }
    }
    sizes.push_back(std::move(s));
  }
  if (sizes.empty()) return absl::InvalidArgumentError("--sizes_mb is empty");
  return sizes;
}

absl::StatusOr<std::vector<std::pair<std::string, int>>> ParseGrpcArgs(
    const std::string& flag) {
  std::vector<std::pair<std::string, int>> args;
  for (absl::string_view piece :
       absl::StrSplit(flag, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(piece, absl::MaxSplits('=', 1));
    int value = 0;
    if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--grpc_args: expected name=integer, got \"", piece, "\""));
    }
    args.emplace_back(std::string(absl::StripAsciiWhitespace(kv.first)), value);
  }
  return args;
}

// tessera::MakeChannel's arguments (common/rpc/grpc_channel.cc) plus `extra`.
std::shared_ptr<grpc::Channel> MakeTunedChannel(
    const std::string& address,
    const std::vector<std::pair<std::string, int>>& extra) {
  grpc::ChannelArguments args = ChannelArgs();
  for (const auto& [name, value] : extra) args.SetInt(name, value);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

// CPU seconds (user + system) of the whole process so far.
double ProcessCpuSeconds() {
  struct rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const struct timeval& tv) {
    return static_cast<double>(tv.tv_sec) + tv.tv_usec * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "unknown";
  return absl::StrCat(a, " ", b, " ", c);
}

struct Measurement {
  double gbps = 0;       // payload bytes / timed seconds / 1e9
  double cpu_cores = 0;  // process CPU seconds / timed seconds
  double seconds = 0;    // timed part
};

// Runs `op` `warmup` times untimed, then `reps` times timed.
// The TLS files of the "tcp-plane TLS" columns: --tls_*, or a CA and a
// certificate for 127.0.0.1 made for this run; nullopt without --tls.
absl::StatusOr<std::optional<TlsFiles>> BenchTlsFiles() {
  if (!FLAGS_tls) return std::optional<TlsFiles>();
  absl::StatusOr<std::optional<TlsFiles>> given = TlsFilesFromFlags();
  if (!given.ok() || given->has_value()) return given;
  if (!FLAGS_serve.empty() || !FLAGS_connect.empty()) {
    return absl::InvalidArgumentError(
        "--serve and --connect time TLS only with --tls_cert, --tls_key and "
        "--tls_ca (a certificate for the serving address that both ends "
        "trust; bench/transport_netns.sh makes one), or --notls");
  }
  char dir[] = "/tmp/bench_transport_tls_XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    return absl::InternalError("no temporary folder for the certificates");
  }
  const std::string d = dir;
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1";
  const std::string script = absl::StrCat(
      "(openssl req -x509 ", ec, " -nodes -days 1 -keyout ", d, "/ca.key -out ",
      d, "/ca.pem -subj /CN=bench-ca",
      " -addext basicConstraints=critical,CA:TRUE",
      " -addext keyUsage=critical,keyCertSign,cRLSign && printf "
      "'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,"
      "clientAuth\n' > ",
      d, "/node.ext && openssl req ", ec, " -nodes -keyout ", d,
      "/node.key -out ", d, "/node.csr -subj /CN=node && openssl x509 -req ",
      "-days 1 -in ", d, "/node.csr -CA ", d, "/ca.pem -CAkey ", d,
      "/ca.key -CAcreateserial -out ", d, "/node.pem -extfile ", d,
      "/node.ext) >/dev/null 2>&1");
  const int rc = std::system(script.c_str());
  absl::StatusOr<std::optional<TlsFiles>> made =
      rc == 0 ? LoadTlsFiles(
                    TlsPaths{d + "/node.pem", d + "/node.key", d + "/ca.pem"})
              : absl::UnavailableError(
                    "the openssl command could not make certificates (give "
                    "--tls_* files, or --notls)");
  std::system(absl::StrCat("rm -rf ", d).c_str());
  return made;
}

// --serve's or --connect's ADDR:PORT: an IPv4 address and a base port
// with room for the three ports after it.
absl::StatusOr<std::pair<std::string, int>> ParseEndpoint(
    const char* flag, const std::string& value) {
  std::string host;
  int port = 0;
  absl::Status s = SplitHostPort(value, &host, &port);
  if (!s.ok() || host.empty() || port < 1 || port > 65535 - 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": expected IPV4ADDR:PORT with PORT in [1, ",
                     65535 - 3, "], got \"", value, "\""));
  }
  return std::make_pair(host, port);
}

template <typename Op>
absl::StatusOr<Measurement> Measure(int64_t bytes, int reps, Op&& op) {
  for (int i = 0; i < FLAGS_warmup; ++i) {
    if (absl::Status s = op(); !s.ok()) return s;
  }
  const double cpu_start = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    if (absl::Status s = op(); !s.ok()) return s;
  }
  const std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - start;
  Measurement m;
  m.seconds = elapsed.count();
  m.gbps = static_cast<double>(bytes) * reps / m.seconds / 1e9;
  m.cpu_cores = (ProcessCpuSeconds() - cpu_start) / m.seconds;
  return m;
}

bench::TransportServerOptions ServerOptions(
    int64_t max_bytes,
    const std::vector<std::pair<std::string, int>>& grpc_args,
    const std::optional<TlsFiles>& tls) {
  bench::TransportServerOptions options;
  options.max_bytes = max_bytes;
  options.chunk_bytes = FLAGS_chunk_bytes;
  options.grpc_args = grpc_args;
  options.tls = tls;
  options.tcp_socket_buffer_bytes = FLAGS_tcp_socket_buffer_bytes;
  return options;
}

// --serve: the server half alone, until one client has come and gone.
absl::Status Serve(int64_t max_bytes,
                   const std::vector<std::pair<std::string, int>>& grpc_args) {
  absl::StatusOr<std::pair<std::string, int>> at =
      ParseEndpoint("serve", FLAGS_serve);
  if (!at.ok()) return at.status();
  absl::StatusOr<std::optional<TlsFiles>> tls_files = BenchTlsFiles();
  if (!tls_files.ok()) return tls_files.status();
  bench::TransportServerOptions options =
      ServerOptions(max_bytes, grpc_args, *tls_files);
  options.host = at->first;
  options.base_port = at->second;
  absl::StatusOr<std::unique_ptr<bench::TransportServer>> server =
      bench::TransportServer::Start(options);
  if (!server.ok()) return server.status();
  const bench::TransportEndpoints& e = (*server)->endpoints();
  std::printf(
      "bench_transport: serving on %s: parameter server and grpc floor %d, "
      "raw TCP %d, data plane %d, TLS data plane %s; until one client has "
      "come and gone\n",
      e.host.c_str(), e.grpc_port, e.tcp_port, at->second + 2,
      e.tls_plane_port > 0 ? absl::StrCat(e.tls_plane_port).c_str() : "none");
  std::fflush(stdout);
  absl::Status status = (*server)->WaitForClient();
  std::printf("bench_transport: the client has gone; stopping\n");
  return status;
}

absl::Status Run() {
  if (FLAGS_chunk_bytes < 4096 || FLAGS_chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chunk_bytes must be in [4096, ", kMaxChunkBytes,
                     "], got ", FLAGS_chunk_bytes));
  }
  if (FLAGS_rounds < 1) {
    return absl::InvalidArgumentError("--rounds must be >= 1");
  }
  if (FLAGS_warmup < 0) {
    return absl::InvalidArgumentError("--warmup must be >= 0");
  }
  absl::StatusOr<std::vector<Size>> sizes_or = ParseSizes(FLAGS_sizes_mb);
  if (!sizes_or.ok()) return sizes_or.status();
  const std::vector<Size>& sizes = *sizes_or;
  absl::StatusOr<std::vector<std::pair<std::string, int>>> grpc_args =
      ParseGrpcArgs(FLAGS_grpc_args);
  if (!grpc_args.ok()) return grpc_args.status();
  int64_t max_bytes = 0;
  for (const Size& s : sizes) max_bytes = std::max(max_bytes, s.bytes);
  if (!FLAGS_serve.empty() && !FLAGS_connect.empty()) {
    return absl::InvalidArgumentError(
        "--serve and --connect are the two ends of a run; give one");
  }
  if (!FLAGS_serve.empty()) return Serve(max_bytes, *grpc_args);
  if (!FLAGS_connect.empty()) {
    absl::StatusOr<std::pair<std::string, int>> at =
        ParseEndpoint("connect", FLAGS_connect);
    if (!at.ok()) return at.status();
  }

  const std::string socket_buffers =
      FLAGS_tcp_socket_buffer_bytes > 0
          ? absl::StrCat(FLAGS_tcp_socket_buffer_bytes, " bytes")
          : "system default";
  const std::string channel =
      grpc_args->empty()
          ? "tessera::MakeChannel / ConfigureServerBuilder"
          : absl::StrCat("tessera's arguments plus ", FLAGS_grpc_args);
  const std::string where =
      FLAGS_connect.empty()
          ? std::string("in-process parameter server over loopback")
          : absl::StrCat(
                "the parameter server of a bench_transport --serve "
                "at ",
                FLAGS_connect, " (another process)");
  std::printf(
      "bench_transport: PsClient <-> %s vs. raw TCP on the same path\n"
      "  chunk_bytes %lld (server and client), rounds %d (median reported), "
      "warm-up %d, reps_scale %g\n"
      "  tcp socket buffers: %s; allocator: tcmalloc; %u hardware threads; "
      "load average at start: %s\n"
      "  grpc channel: %s\n",
      where.c_str(), static_cast<long long>(FLAGS_chunk_bytes), FLAGS_rounds,
      FLAGS_warmup, FLAGS_reps_scale, socket_buffers.c_str(),
      std::thread::hardware_concurrency(), LoadAverage().c_str(),
      channel.c_str());
  std::fflush(stdout);

  absl::StatusOr<std::optional<TlsFiles>> tls_files = BenchTlsFiles();
  if (!tls_files.ok()) return tls_files.status();
  const bench::TransportServerOptions server_options =
      ServerOptions(max_bytes, *grpc_args, *tls_files);

  // The server half: in this process on loopback, or another process's
  // (--connect), e.g. across a veth pair between network namespaces.
  std::unique_ptr<bench::TransportServer> local_server;
  bench::TransportEndpoints endpoints;
  if (FLAGS_connect.empty()) {
    absl::StatusOr<std::unique_ptr<bench::TransportServer>> started =
        bench::TransportServer::Start(server_options);
    if (!started.ok()) return started.status();
    local_server = *std::move(started);
    endpoints = local_server->endpoints();
  } else {
    absl::StatusOr<std::pair<std::string, int>> at =
        ParseEndpoint("connect", FLAGS_connect);
    if (!at.ok()) return at.status();
    endpoints.host = at->first;
    endpoints.grpc_port = at->second;
    endpoints.tcp_port = at->second + 1;
    endpoints.tls_plane_port = tls_files->has_value() ? at->second + 3 : 0;
  }
  const std::string address =
      absl::StrCat(endpoints.host, ":", endpoints.grpc_port);
  // The raw TCP reference first: a --serve process ends once its client
  // has come and gone.
  absl::StatusOr<std::unique_ptr<bench::TcpReference>> tcp =
      bench::TcpReference::Connect(endpoints.host, endpoints.tcp_port,
                                   max_bytes, FLAGS_tcp_socket_buffer_bytes);
  if (!tcp.ok()) return tcp.status();
  std::unique_ptr<DensePlaneClient> tls_client;
  if (endpoints.tls_plane_port > 0) {
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> tls =
        DataPlaneTls::Create(**tls_files, DataPlaneTls::Role::kClient);
    if (!tls.ok()) return tls.status();
    DensePlaneClientOptions options;
    options.host = endpoints.host;
    const int tls_port = endpoints.tls_plane_port;
    options.resolve_port = [tls_port]() -> absl::StatusOr<int> {
      return tls_port;
    };
    // One connection to say how its records are encrypted.
    absl::StatusOr<Socket> probe =
        Socket::Connect(endpoints.host, tls_port, 30);
    if (!probe.ok()) return probe.status();
    if (absl::Status s = (*tls)->Connect(*probe, endpoints.host); !s.ok()) {
      return s;
    }
    std::printf("  tcp-plane TLS: %s\n", DescribeTls(*probe).c_str());
    std::fflush(stdout);
    options.tls = *std::move(tls);
    options.peer = "ps 0 (TLS plane)";
    tls_client = std::make_unique<DensePlaneClient>(std::move(options));
  }

  PsClientOptions client_options;
  client_options.chunk_bytes = FLAGS_chunk_bytes;
  PsClient client(address, 0,
                  grpc_args->empty() ? MakeChannel(address, ChannelSecurity())
                                     : MakeTunedChannel(address, *grpc_args),
                  client_options);
  // Its own channel (one TCP connection each, as
  // GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL gives every channel), built the same way
  // as the client's.
  bench::GrpcFloorClient floor(grpc_args->empty()
                                   ? MakeChannel(address, ChannelSecurity())
                                   : MakeTunedChannel(address, *grpc_args),
                               max_bytes, FLAGS_chunk_bytes);
  PsClientOptions plane_client_options = client_options;
  plane_client_options.data_plane = DataPlaneKind::kTcp;
  PsClient plane_client(address, 0, MakeChannel(address, ChannelSecurity()),
                        plane_client_options);
  HealthResponse health;
  if (absl::Status s = client.Health(&health, 30); !s.ok()) return s;

  CreateShardsRequest create;
  create.mutable_optimizer()->set_learning_rate(kLearningRate);
  create.mutable_optimizer()->mutable_sgd();
  for (const Size& s : sizes) {
    ShardDef* def = create.add_shards();
    def->set_name(s.shard);
    def->set_variable(absl::StrCat("bench_transport/", s.bytes, "B"));
    def->set_index(0);
    def->set_row_offset(0);
    def->mutable_variable_shape()->add_dims(s.bytes / sizeof(float));
    def->mutable_shape()->add_dims(s.bytes / sizeof(float));
    def->set_dtype(DT_FLOAT);
    def->mutable_initializer()->set_kind(Initializer::ZEROS);
  }
  CreateShardsResponse created;
  if (absl::Status s = client.CreateShards(create, &created); !s.ok()) {
    return s;
  }

  // The client's buffers, allocated and touched once, reused throughout.
  const size_t max_floats = max_bytes / sizeof(float);
  std::vector<float> grads(max_floats, kGradient);
  std::vector<float> pulled(max_floats, 0.0f);
  // Local reference only: a gradient buffer and values, as on the server.
  std::vector<float> scratch(max_floats, 0.0f);
  std::vector<float> values(max_floats, 0.0f);
  const SgdOptimizer sgd(kLearningRate);

  std::vector<Row> rows;
  for (const Size& size : sizes) {
    const size_t n = size.bytes / sizeof(float);
    const std::vector<std::string> names = {size.shard};
    const absl::Span<const float> grad(grads.data(), n);
    const absl::Span<float> out(pulled.data(), n);
    int64_t pushes = 0;
    int64_t last_version = 0;
    PushResponse response;

    auto push_with = [&](PsClient& through) -> absl::Status {
      response.Clear();
      absl::Status s = through.PushDense(names, absl::MakeConstSpan(&grad, 1),
                                         {}, &response);
      if (!s.ok()) return s;
      ++pushes;
      if (response.applied_size() != 1 ||
          response.applied(0).version() != pushes) {
        return absl::InternalError(absl::StrCat(
            "PushDense of ", size.shard, ": expected version ", pushes,
            " applied, got ", response.ShortDebugString()));
      }
      last_version = response.applied(0).version();
      return absl::OkStatus();
    };
    auto pull_with = [&](PsClient& through) -> absl::Status {
      return through.PullDense(names, absl::MakeConstSpan(&out, 1), nullptr);
    };
    auto push = [&] { return push_with(client); };
    auto pull = [&] { return pull_with(client); };
    auto plane_push = [&] { return push_with(plane_client); };
    auto plane_pull = [&] { return pull_with(plane_client); };
    auto plane_pp = [&] {
      absl::Status s = plane_push();
      return s.ok() ? plane_pull() : s;
    };
    // The TLS plane's client is a DensePlaneClient of its own (PsClient
    // reaches the announced plane only); the same calls PsClient makes.
    auto tls_push = [&]() -> absl::Status {
      if (tls_client == nullptr) return absl::OkStatus();
      response.Clear();
      absl::Status s = tls_client->PushDense(
          names, absl::MakeConstSpan(&grad, 1), {}, &response, nullptr);
      if (!s.ok()) return s;
      ++pushes;
      if (response.applied_size() != 1 ||
          response.applied(0).version() != pushes) {
        return absl::InternalError(absl::StrCat(
            "TLS PushDense of ", size.shard, ": expected version ", pushes,
            " applied, got ", response.ShortDebugString()));
      }
      last_version = response.applied(0).version();
      return absl::OkStatus();
    };
    auto tls_pull = [&]() -> absl::Status {
      if (tls_client == nullptr) return absl::OkStatus();
      return tls_client->PullDense(names, absl::MakeConstSpan(&out, 1),
                                   nullptr);
    };
    auto tls_pp = [&] {
      absl::Status s = tls_push();
      return s.ok() ? tls_pull() : s;
    };
    // The work a push costs the server beyond receiving the bytes, done
    // locally on the same number of floats: the context for the push ratio.
    auto local_memcpy = [&]() {
      std::memcpy(scratch.data(), grads.data(), size.bytes);
      return absl::OkStatus();
    };
    auto local_copy_check = [&]() {  // as DensePushReactor::Accept does
      const int64_t chunk_floats = FLAGS_chunk_bytes / sizeof(float);
      for (size_t i = 0; i < n; i += chunk_floats) {
        const size_t len = std::min<size_t>(chunk_floats, n - i);
        std::memcpy(scratch.data() + i, grads.data() + i, len * sizeof(float));
        if (absl::Status s = CheckFinite(
                absl::MakeConstSpan(scratch.data() + i, len), size.shard, i);
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    };
    auto local_sgd = [&]() {
      sgd.Apply(values.data(), scratch.data(), nullptr, n, 1);
      return absl::OkStatus();
    };
    auto tcp_push = [&]() { return (*tcp)->Push(size.bytes); };
    auto tcp_pull = [&]() { return (*tcp)->Pull(size.bytes); };
    auto tcp_pp = [&]() {
      absl::Status s = (*tcp)->Push(size.bytes);
      return s.ok() ? (*tcp)->Pull(size.bytes) : s;
    };
    auto grpc_push = [&]() { return floor.Push(size.bytes); };
    auto grpc_pull = [&]() { return floor.Pull(size.bytes); };

    struct Kind {
      const char* name;
      std::function<absl::Status()> op;
      std::vector<double> gbps;
    };
    Kind kinds[] = {{"tessera push", push, {}},
                    {"tcp push", tcp_push, {}},
                    {"tessera pull", pull, {}},
                    {"tcp pull", tcp_pull, {}},
                    {"local memcpy", local_memcpy, {}},
                    {"local copy+check", local_copy_check, {}},
                    {"local sgd", local_sgd, {}},
                    {"grpc push", grpc_push, {}},
                    {"grpc pull", grpc_pull, {}},
                    {"tcp-plane push", plane_push, {}},
                    {"tcp-plane pull", plane_pull, {}},
                    {"tcp-plane pp", plane_pp, {}},
                    {"tcp pp", tcp_pp, {}},
                    {"tls-plane push", tls_push, {}},
                    {"tls-plane pull", tls_pull, {}},
                    {"tls-plane pp", tls_pp, {}}};
    for (int round = 1; round <= FLAGS_rounds; ++round) {
      for (Kind& kind : kinds) {
        if (!absl::StrContains(kind.name, FLAGS_only) ||
            (tls_client == nullptr && absl::StartsWith(kind.name, "tls"))) {
          kind.gbps.push_back(0);
          continue;
        }
        absl::StatusOr<Measurement> m = Measure(size.bytes, size.reps, kind.op);
        if (!m.ok()) {
          return absl::Status(m.status().code(),
                              absl::StrCat(size.label, " ", kind.name, ": ",
                                           m.status().message()));
        }
        kind.gbps.push_back(m->gbps);
        std::fprintf(stderr,
                     "[%s, round %d/%d] %-16s %3d reps in %5.2f s  %6.2f GB/s  "
                     "cpu %.2f cores, %.2f cpu s/GB\n",
                     size.label.c_str(), round, FLAGS_rounds, kind.name,
                     size.reps, m->seconds, m->gbps, m->cpu_cores,
                     m->cpu_cores / m->gbps);
      }
    }

    // The pushes were applied: every element moved by -lr * g per push.
    if (absl::Status s = pull(); !s.ok()) return s;
    const float first = out[0];
    const bool uniform = std::all_of(out.begin(), out.end(),
                                     [&](float v) { return v == first; });
    if (!uniform || (pushes > 0 && !(first < 0.0f)) || last_version != pushes) {
      return absl::InternalError(absl::StrCat(
          size.label, ": after ", pushes, " pushes the shard is at version ",
          last_version, ", value[0] ", first, uniform ? "" : ", not uniform"));
    }

    Row row;
    row.push = Median(kinds[0].gbps);
    row.tcp_push = Median(kinds[1].gbps);
    row.pull = Median(kinds[2].gbps);
    row.tcp_pull = Median(kinds[3].gbps);
    row.memcpy = Median(kinds[4].gbps);
    row.copy_check = Median(kinds[5].gbps);
    row.sgd = Median(kinds[6].gbps);
    row.grpc_push = Median(kinds[7].gbps);
    row.grpc_pull = Median(kinds[8].gbps);
    row.plane_push = Median(kinds[9].gbps);
    row.plane_pull = Median(kinds[10].gbps);
    row.plane_pp = Median(kinds[11].gbps);
    row.tcp_pp = Median(kinds[12].gbps);
    row.tls_push = Median(kinds[13].gbps);
    row.tls_pull = Median(kinds[14].gbps);
    row.tls_pp = Median(kinds[15].gbps);
    rows.push_back(row);
  }
  tcp->reset();
  tls_client.reset();
  local_server.reset();

  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  // "ratio" is tcp-plane / tcp (the target); "grpc" is Tessera's gRPC
  // path and "floor" the same gRPC calls with nothing done with the bytes
  // (the most any gRPC service reaches here).
  std::printf("\n%-8s %4s | %-21s %6s | %-20s | %-15s | %-11s | %-17s | %s\n",
              "", "", "tessera tcp-plane", "", "tessera tcp-plane TLS",
              "tessera grpc", "grpc floor", "tcp", "ratio tcp-plane/tcp");
  std::printf(
      "%-8s %4s | %6s %6s %6s %6s | %6s %6s %6s | %7s %7s | %5s %5s | %5s "
      "%5s %5s | %5s %5s %5s\n",
      "size", "reps", "push", "pull", "PP", "", "push", "pull", "PP", "push",
      "pull", "push", "pull", "push", "pull", "PP", "push", "pull", "PP");
  std::vector<std::string> missed, evaluated;
  bool has16 = false, has64 = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Size& s = sizes[i];
    const Row& r = rows[i];
    const double push_ratio = ratio(r.plane_push, r.tcp_push);
    const double pull_ratio = ratio(r.plane_pull, r.tcp_pull);
    const double pp_ratio = ratio(r.plane_pp, r.tcp_pp);
    std::printf(
        "%-8s %4d | %6.2f %6.2f %6.2f %6s | %6.2f %6.2f %6.2f | %7.2f %7.2f | "
        "%5.2f %5.2f | %5.2f %5.2f %5.2f | %5.2f %5.2f %5.2f\n",
        s.label.c_str(), s.reps, r.plane_push, r.plane_pull, r.plane_pp, "",
        r.tls_push, r.tls_pull, r.tls_pp, r.push, r.pull, r.grpc_push,
        r.grpc_pull, r.tcp_push, r.tcp_pull, r.tcp_pp, push_ratio, pull_ratio,
        pp_ratio);
    if (s.bytes == 16 * kMiB || s.bytes == 64 * kMiB) {
      (s.bytes == 16 * kMiB ? has16 : has64) = true;
      evaluated.push_back(s.label);
      if (push_ratio < kTargetRatio) {
        missed.push_back(absl::StrFormat("push %s %.2f", s.label, push_ratio));
      }
      if (pull_ratio < kTargetRatio) {
        missed.push_back(absl::StrFormat("pull %s %.2f", s.label, pull_ratio));
      }
      if (s.bytes == 16 * kMiB && pp_ratio < kTargetRatio) {
        missed.push_back(absl::StrFormat("PP %s %.2f", s.label, pp_ratio));
      }
    }
  }
  std::printf(
      "\nno transport, one thread (the server's own work on a push):\n"
      "%-10s | %8s %10s %8s | %12s %6s\n",
      "size", "memcpy", "copy+check", "sgd", "tcp then sgd", "ratio");
  std::printf("%-10s | %8s %10s %8s | %12s %6s\n", "", "GB/s", "GB/s", "GB/s",
              "GB/s", "");
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Row& r = rows[i];
    // The best a push can do while the server applies the update after the
    // last byte arrived, even if the bytes arrived at TCP speed.
    const double bound = r.tcp_push > 0 && r.sgd > 0
                             ? 1.0 / (1.0 / r.tcp_push + 1.0 / r.sgd)
                             : 0.0;
    std::printf("%-10s | %8.2f %10.2f %8.2f | %12.2f %6.2f\n",
                sizes[i].label.c_str(), r.memcpy, r.copy_check, r.sgd, bound,
                ratio(bound, r.tcp_push));
  }
  std::printf("load average at end: %s\n", LoadAverage().c_str());
  if (evaluated.empty()) {
    std::printf(
        "target (tcp-plane >= %.1f x TCP at 16 and 64 MiB, PP at 16): not "
        "evaluated, neither size was measured\n",
        kTargetRatio);
  } else {
    const std::string partial =
        has16 && has64 ? ""
                       : absl::StrCat(" (only ", absl::StrJoin(evaluated, ", "),
                                      " measured)");
    if (missed.empty()) {
      std::printf(
          "target (tcp-plane >= %.1f x TCP at 16 and 64 MiB, PP at 16): "
          "MET%s\n",
          kTargetRatio, partial.c_str());
    } else {
      std::printf(
          "target (tcp-plane >= %.1f x TCP at 16 and 64 MiB, PP at 16): "
          "MISSED%s: "
          "%s\n",
          kTargetRatio, partial.c_str(), absl::StrJoin(missed, ", ").c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::BenchMain(
      argc, argv, "bench_transport",
      "bench_transport: dense push/pull of a PsClient against one in-process "
      "parameter server over loopback, with raw TCP of the same sizes as the "
      "reference. Flags: --sizes_mb, --chunk_bytes, --rounds, --reps_scale.",
      tessera::Run);
}
