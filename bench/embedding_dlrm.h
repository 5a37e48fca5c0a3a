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
  int workers = 2;  // client threads, one step at a time each
  double zipf_s = 1.05;
};

// Runs on servers forked (ForkServer) before any gRPC use; shuts them down.
// Returns 0 unless a call fails.
int RunDlrmTables(std::vector<ServerProcess>& servers,
                  const DlrmTablesOptions& options);

}  // namespace tessera

#endif  // TESSERA_BENCH_EMBEDDING_DLRM_H_
