#include "bench/embedding_servers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/rpc/grpc_channel.h"
#include "glog/logging.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "ps_server/ps_service.h"
#include "ps_server/shard_store.h"

namespace tessera {
namespace {

double Helper1(double x) {
  return std::fabs(x) > 1e-8 ? std::log1p(x) / x
                             : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

double Helper2(double x) {
  return std::fabs(x) > 1e-8
             ? std::expm1(x) / x
             : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

}  // namespace

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int64_t ProcStatusBytes(const std::string& key, pid_t pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      int64_t kb = 0;
      std::sscanf(line.c_str() + key.size() + 1, "%ld", &kb);
      return kb * 1024;
    }
  }
  return 0;
}

ZipfSampler::ZipfSampler(int64_t n, double s) : n_(n), s_(s) {
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(n + 0.5);
  s2_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

int64_t ZipfSampler::operator()(std::mt19937_64& rng) const {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  while (true) {
    const double u =
        h_integral_n_ + uniform(rng) * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    int64_t k = static_cast<int64_t>(x + 0.5);
    k = std::clamp<int64_t>(k, 1, n_);
    if (k - x <= s2_ || u >= HIntegral(k + 0.5) - H(k)) return k;
  }
}

double ZipfSampler::H(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1.0 - s_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - s_);
  if (t < -1.0) t = -1.0;
  return std::exp(Helper1(t) * x);
}

int64_t HashId(int64_t rank) {
  return static_cast<int64_t>(static_cast<uint64_t>(rank) *
                              0x9E3779B97F4A7C15ull);
}

OptimizerConfig OptimizerNamed(const std::string& name) {
  OptimizerConfig config;
  config.set_learning_rate(0.01f);
  if (name == "sgd") {
    config.mutable_sgd();
  } else if (name == "rowwise_adagrad") {
    config.mutable_rowwise_adagrad();
  } else {
    config.mutable_adagrad();
  }
  return config;
}

ShardDef HashDef(const std::string& variable, int64_t dim, int index,
                 int num_shards, int64_t expected_rows) {
  ShardDef def;
  def.set_name(absl::StrCat(variable, "/part_", index));
  def.set_variable(variable);
  def.set_index(index);
  def.set_dtype(DT_FLOAT);
  def.set_hash_table(true);
  def.set_dim(dim);
  def.set_num_shards(num_shards);
  def.set_expected_rows(expected_rows);
  Initializer* init = def.mutable_initializer();
  init->set_kind(Initializer::UNIFORM);
  init->set_minval(-0.05f);
  init->set_maxval(0.05f);
  init->set_seed(7);
  return def;
}

ServerProcess ForkServer(int64_t row_memory_budget,
                         const std::string& disk_root) {
  int fds[2];
  PCHECK(pipe(fds) == 0);
  ServerProcess p;
  p.pid = fork();
  if (p.pid == 0) {
    close(fds[0]);
    ShardStoreOptions options;
    if (row_memory_budget > 0) {
      // As tessera_ps: the budget bounds the whole server process.
      options.row_budget = std::make_shared<RowMemoryBudget>(
          row_memory_budget, disk_root, &ProcessResidentBytes);
    }
    ShardStore store(options);
    PsCore core(&store);
    ParameterServerService service(&core, PsServiceOptions());
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    const std::string hello =
        absl::StrCat(port, " ", ProcStatusBytes("VmRSS"), "\n");
    (void)!write(fds[1], hello.data(), hello.size());
    service.shutdown_requested().WaitForNotification();
    const std::string bye = absl::StrCat(ProcStatusBytes("VmRSS"), " ",
                                         ProcStatusBytes("VmHWM"), "\n");
    (void)!write(fds[1], bye.data(), bye.size());
    close(fds[1]);
    _exit(0);  // skips destructors: the table's pages go with the process
  }
  close(fds[1]);
  p.fd = fds[0];
  return p;
}

std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

ServerExit StopServer(ServerProcess& server, PsClient& admin) {
  ServerExit exit;
  HealthResponse health;
  if (admin.Health(&health).ok())
    exit.accounted_bytes = health.resident_bytes();
  (void)admin.Shutdown("bench done");
  std::vector<std::string> parts = absl::StrSplit(ReadLine(server.fd), ' ');
  if (parts.size() == 2) {
    (void)absl::SimpleAtoi(parts[0], &exit.rss);
    (void)absl::SimpleAtoi(parts[1], &exit.hwm);
  }
  waitpid(server.pid, nullptr, 0);
  return exit;
}

std::vector<std::unique_ptr<PsClient>> ConnectServers(
    std::vector<ServerProcess>& servers) {
  std::vector<std::unique_ptr<PsClient>> clients;
  for (ServerProcess& s : servers) {
    std::vector<std::string> parts = absl::StrSplit(ReadLine(s.fd), ' ');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &s.baseline_rss)) {
      LOG(ERROR) << "a server process did not start";
      return {};
    }
    s.address = absl::StrCat("127.0.0.1:", parts[0]);
    clients.push_back(std::make_unique<PsClient>(
        s.address, 0, MakeChannel(s.address, ChannelSecurity())));
  }
  return clients;
}

}  // namespace tessera
