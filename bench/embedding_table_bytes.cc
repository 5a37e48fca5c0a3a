#include "bench/embedding_table_bytes.h"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "bench/embedding_servers.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "glog/logging.h"
#include "partitioners/hash_routing.h"
#include "ps_server/hash_table.h"
#include "ps_server/shard.h"

namespace tessera {
namespace {

struct Config {
  const char* name;
  RowPrecision precision;
  bool rowwise;
};

constexpr Config kConfigs[] = {
    {"fp32+adagrad", ROW_FP32, false},
    {"fp16+rowwise_adagrad", ROW_FP16, true},
    {"bf16+rowwise_adagrad", ROW_BF16, true},
};

// What a child reports through its pipe.
struct Measured {
  double accounted_per_row = 0;  // resident_bytes / rows
  double rss_per_row = 0;        // VmRSS growth / rows
  int64_t values = 0, slots = 0, header = 0;
  double index = 0;  // accounted - record bytes, per row
  int ok = 0;
};

OptimizerConfig ConfigFor(bool rowwise) {
  OptimizerConfig config;
  config.set_learning_rate(0.01f);
  if (rowwise) {
    config.mutable_rowwise_adagrad();
  } else {
    config.mutable_adagrad();
  }
  return config;
}

Measured MeasureChild(bool hash, int64_t dim, const Config& c, int64_t rows) {
  Measured m;
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(ConfigFor(c.rowwise));
  CHECK(optimizer.ok()) << optimizer.status();
  const TableRowBytes layout = RowBytesOf(c.precision, dim, **optimizer, hash);
  m.values = layout.values;
  m.slots = layout.slots;
  const int64_t before = ProcStatusBytes("VmRSS");
  int64_t accounted = 0, record = layout.values + layout.slots;
  // Kept alive until VmRSS is read.
  std::unique_ptr<HashTable> table;
  std::unique_ptr<Shard> shard;
  if (hash) {
    ShardDef def = HashDef("bytes", dim, 0, 1, rows);
    def.set_precision(c.precision);
    absl::StatusOr<std::unique_ptr<HashTable>> made =
        HashTable::Create(def, optimizer->get());
    CHECK(made.ok()) << made.status();
    table = *std::move(made);
    std::vector<int64_t> ids(4096);
    std::vector<float> sink(ids.size() * dim);
    for (int64_t next = 0; next < rows;) {
      ids.resize(std::min<int64_t>(4096, rows - next));
      for (int64_t& id : ids) id = HashId(++next);
      table->Read(ids, sink.data());
    }
    accounted = table->resident_bytes();
    record = table->record_bytes();
    m.header = record - layout.values - layout.slots;
  } else {
    ShardDef def;
    def.set_name("bytes/part_0");
    def.set_variable("bytes");
    def.set_dtype(DT_FLOAT);
    def.mutable_variable_shape()->add_dims(rows);
    def.mutable_variable_shape()->add_dims(dim);
    def.mutable_shape()->add_dims(rows);
    def.mutable_shape()->add_dims(dim);
    def.mutable_initializer()->set_kind(Initializer::UNIFORM);
    def.mutable_initializer()->set_minval(-0.05f);
    def.mutable_initializer()->set_maxval(0.05f);
    def.set_precision(c.precision);
    absl::StatusOr<std::unique_ptr<Shard>> made =
        Shard::Create(def, optimizer->get());
    CHECK(made.ok()) << made.status();
    shard = *std::move(made);
    accounted = shard->resident_bytes();
  }
  const int64_t rss = ProcStatusBytes("VmRSS") - before;
  m.accounted_per_row = static_cast<double>(accounted) / rows;
  m.rss_per_row = static_cast<double>(rss) / rows;
  m.index = m.accounted_per_row - record;
  m.ok = 1;
  return m;
}

Measured Measure(bool hash, int64_t dim, const Config& c, int64_t rows) {
  int fds[2];
  CHECK_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Measured m = MeasureChild(hash, dim, c, rows);
    CHECK_EQ(write(fds[1], &m, sizeof(m)), static_cast<ssize_t>(sizeof(m)));
    _exit(0);
  }
  close(fds[1]);
  Measured m;
  if (read(fds[0], &m, sizeof(m)) != static_cast<ssize_t>(sizeof(m))) {
    m.ok = 0;
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) m.ok = 0;
  return m;
}

}  // namespace

int RunTableBytes(const std::vector<int64_t>& dims, int64_t rows) {
  std::printf(
      "\ntable_bytes: bytes a server holds per row, %ld rows per table; "
      "accounted = the table's resident_bytes / rows = values + slots + "
      "header (id, padding to 8) + index and blocks; rss = VmRSS growth / "
      "rows (fresh process); ratio = accounted / fp32+adagrad's\n",
      rows);
  std::printf("%-6s %4s %-22s %9s %7s %6s %7s %8s %8s %7s\n", "table", "dim",
              "precision+optimizer", "accounted", "values", "slots", "header",
              "index+bl", "rss", "ratio");
  int rc = 0;
  for (const bool hash : {true, false}) {
    for (int64_t dim : dims) {
      double base = 0;
      for (const Config& c : kConfigs) {
        const Measured m = Measure(hash, dim, c, rows);
        if (!m.ok) {
          LOG(ERROR) << "table_bytes child failed: " << c.name << " dim "
                     << dim;
          rc = 1;
          continue;
        }
        if (base == 0) base = m.accounted_per_row;
        std::printf("%-6s %4ld %-22s %9.1f %7ld %6ld %7ld %8.1f %8.1f %6.3fx\n",
                    hash ? "hash" : "fixed", dim, c.name, m.accounted_per_row,
                    m.values, m.slots, m.header, m.index, m.rss_per_row,
                    m.accounted_per_row / base);
        std::fflush(stdout);
      }
    }
  }
  return rc;
}

}  // namespace tessera
