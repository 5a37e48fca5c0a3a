// The parameter servers' shards in this process, without the network: the
// public way for a tool that trains or writes variables itself (the
// one-process trainer, tessera_keras' initial checkpoint) to hold a
// model's variables as a parameter server holds them, update them with the
// server's own optimizers, and save them as a checkpoint that a cluster
// restores and tessera_export and tessera_predict read.
//
// Each variable is held whole on one shard, as one parameter server with
// no partitioner holds it, and is named by the index Add returned for it.
//
// Thread safety: one call at a time.
#ifndef TESSERA_PS_SERVER_EMBEDDED_EMBEDDED_SHARDS_H_
#define TESSERA_PS_SERVER_EMBEDDED_EMBEDDED_SHARDS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "proto/checkpoint.pb.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"

namespace tessera {

class EmbeddedShards {
 public:
  EmbeddedShards();
  ~EmbeddedShards();
  EmbeddedShards(const EmbeddedShards&) = delete;
  EmbeddedShards& operator=(const EmbeddedShards&) = delete;

  // Creates the shard of `variable`, updated by `optimizer`, with the
  // initial values and fresh slots a parameter server gives it; returns its
  // index, counted from 0 in the order of Add. Errors are a parameter
  // server's for the same definition (CreateShards).
  absl::StatusOr<int> Add(const VariableDef& variable,
                          const OptimizerConfig& optimizer);

  // A variable of fixed size (dense, or a table with a vocabulary): its
  // number of elements, its values copied into `out` (num_elements(v) of
  // them), and its values replaced with `values`, slots and update counts
  // kept. SetValues fails with FailedPrecondition for a growing table and
  // InvalidArgument, naming the variable, when the sizes differ; nothing
  // changes then. ApplyGradient applies a gradient of the whole variable
  // with its optimizer. REQUIRES: gradient.size() == num_elements(v), all
  // finite.
  int64_t num_elements(int v) const;
  void ReadValues(int v, absl::Span<float> out) const;
  absl::Status SetValues(int v, absl::Span<const float> values);
  void ApplyGradient(int v, absl::Span<const float> gradient);

  // A variable as rows by id, a table of either kind: the elements of one
  // row; whether every id is one the table holds or may grow to hold
  // (InvalidArgument naming the id otherwise); the rows `ids`, in order,
  // copied to `out` (ids.size() * row_elements(v) floats; a growing table
  // creates the rows it does not hold yet); and a gradient per row of
  // `ids` applied with the variable's optimizer. REQUIRES for ReadRows and
  // ApplyRows: CheckIds(v, ids).ok(); for ApplyRows also ids unique and
  // gradients finite.
  int64_t row_elements(int v) const;
  absl::Status CheckIds(int v, absl::Span<const int64_t> ids) const;
  void ReadRows(int v, absl::Span<const int64_t> ids, float* out);
  void ApplyRows(int v, absl::Span<const int64_t> ids,
                 absl::Span<const float> gradients);

  // A fixed-size variable's whole state: its values, its optimizer's
  // slots (in Optimizer::slot_name order) and its update count (Adam's
  // t), to hold it elsewhere (a mirrored replica) and put it back.
  // FailedPrecondition for a growing table; SetState InvalidArgument,
  // naming the variable, for sizes or a slot count that differ (nothing
  // changes then).
  struct State {
    std::vector<float> values;
    std::vector<std::vector<float>> slots;
    int64_t updates = 0;
  };
  absl::StatusOr<State> GetState(int v) const;
  absl::Status SetState(int v, State state);

  // Writes every variable into <directory>/<file_name> as a parameter
  // server writes its shards (ps_server/shard_checkpoint.h), the file and
  // shards marked as `writer`'s; `response` lists them for a manifest.
  absl::Status SaveShards(const std::string& directory,
                          const std::string& file_name, int writer,
                          SaveShardsResponse* response) const;
  // Fills every variable from the checkpoint `manifest` describes, in
  // `directory`, wherever it was saved (any number of servers, or a
  // replica's file), as a parameter server restores its shards; all or
  // nothing, with its errors.
  absl::Status Restore(const CheckpointManifest& manifest,
                       const std::string& directory);

  // Writes every variable as the checkpoint of one parameter server under
  // checkpoint root `root` (common/checkpoint/checkpoint_dir.h), at global
  // step `step` and to resume at epoch `epoch`, with `job` and its
  // optimizer and partitioner in the manifest, as a cluster's coordinator
  // writes it. Returns the checkpoint's folder; errors name the file.
  absl::StatusOr<std::string> SaveCheckpoint(const JobConfig& job,
                                             const std::string& root,
                                             int64_t step, int epoch) const;

 private:
  struct Held;
  std::unique_ptr<Held> held_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_EMBEDDED_EMBEDDED_SHARDS_H_
