// Helpers shared by bench_embedding's modes: Zipf ids, hash-table shard
// definitions, and parameter servers forked into processes of their own
// (so each one's resident memory can be read alone).

#ifndef TESSERA_BENCH_EMBEDDING_SERVERS_H_
#define TESSERA_BENCH_EMBEDDING_SERVERS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "proto/ps_service.pb.h"
#include "ps_server/client/ps_client.h"

namespace tessera {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since);

// "VmRSS" or "VmHWM" of process `pid` (0: this one) from
// /proc/<pid>/status, in bytes; 0 when it cannot be read.
int64_t ProcStatusBytes(const std::string& key, pid_t pid = 0);

// Zipf ranks in [1, n] with P(k) ~ k^-s, by Hörmann and Derflinger's
// rejection-inversion (as Apache Commons RNG's sampler): O(1) per draw and
// no table, whatever n.
class ZipfSampler {
 public:
  ZipfSampler(int64_t n, double s);
  int64_t operator()(std::mt19937_64& rng) const;

 private:
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  const int64_t n_;
  const double s_;
  double h_integral_x1_, h_integral_n_, s2_;
};

// Hash-table ids of Zipf rank k: scattered over int64 like hashed
// categorical values (odd multiplier: one id per rank).
int64_t HashId(int64_t rank);

// learning rate 0.01, "sgd", "rowwise_adagrad" or else Adagrad.
OptimizerConfig OptimizerNamed(const std::string& name);

// Shard `index` of `num_shards` of a hash table `variable`.
ShardDef HashDef(const std::string& variable, int64_t dim, int index,
                 int num_shards, int64_t expected_rows);

struct ServerProcess {
  pid_t pid = -1;
  int fd = -1;  // reads "port baseline_rss" then "rss hwm"
  std::string address;
  int64_t baseline_rss = 0;
};

// Forks a parameter server process. Must run before this process starts
// any gRPC machinery, which does not survive fork(). It reports its port
// and resident bytes on fd, and its final resident and peak bytes when
// shut down. With `row_memory_budget` > 0 it keeps at most that many bytes
// of rows in memory and the rest in a disk tier under `disk_root`
// (tessera_ps --row_memory_budget).
ServerProcess ForkServer(int64_t row_memory_budget = 0,
                         const std::string& disk_root = "");

// One line from fd, without the newline.
std::string ReadLine(int fd);

// What a forked server reported as it stopped: its own accounting (-1 when
// the last Health call failed), then its resident and peak bytes.
struct ServerExit {
  int64_t accounted_bytes = -1;
  int64_t rss = 0, hwm = 0;
};

// Asks `server` (through `admin`) for its accounting, shuts it down, reads
// its last memory figures and reaps the process.
ServerExit StopServer(ServerProcess& server, PsClient& admin);

// Reads each forked server's port and baseline memory and connects a
// client to each; empty (after logging why) when a server did not start.
std::vector<std::unique_ptr<PsClient>> ConnectServers(
    std::vector<ServerProcess>& servers);

}  // namespace tessera

#endif  // TESSERA_BENCH_EMBEDDING_SERVERS_H_
