// bench_embedding --mode=dlrm: the 26 embedding tables of MLPerf's DLRM on
// Criteo 1TB (their row counts with ids capped at 40M, divided by
// row_divisor to fit the machine), as Adagrad hash tables spread over
// forked parameter servers, trained with a DLRM batch: every example reads
// one Zipf-drawn id from every table. Reports per server the rows held,
// bytes held per row against the payload (dim x 4 x 2), and the rows pulled
// and pushed per second.

#ifndef TESSERA_BENCH_EMBEDDING_DLRM_H_
#define TESSERA_BENCH_EMBEDDING_DLRM_H_

#include <cstdint>
#include <vector>

#include "bench/embedding_servers.h"

namespace tessera {

struct DlrmTablesOptions {
  int64_t row_divisor = 100;  // 1: the reference's 188M rows
  int64_t dim = 16;           // the reference: 128
  int batch = 2048;           // examples per step
  int steps = 300;
  int warmup_steps = 0;  // untimed, before the timed steps
  int workers = 2;       // client threads, one step at a time each
  double zipf_s = 1.05;
};

// What a run measured, for benches that compare runs (bench_disk_tier).
struct DlrmTablesResult {
  double examples_per_s = 0;  // of table traffic, over all servers
  int64_t rows = 0;           // created, over all tables
  std::vector<ServerExit> servers;
};

// Runs on servers forked (ForkServer) before any gRPC use; shuts them down.
// Returns 0 unless a call fails; fills `result` when given.
int RunDlrmTables(std::vector<ServerProcess>& servers,
                  const DlrmTablesOptions& options,
                  DlrmTablesResult* result = nullptr);

// Rows of each of the 26 tables at `row_divisor`.
std::vector<int64_t> DlrmTableRows(int64_t row_divisor);

}  // namespace tessera

#endif  // TESSERA_BENCH_EMBEDDING_DLRM_H_
