// A data set's examples read as a model's inputs: whatever the file format,
// a step gathers the examples it names into one HostBatch laid out as the
// model description's inputs, which the layer graph trains on. Adding a
// format means adding an ExampleSet, not touching the worker or the graph.

#ifndef TESSERA_DATA_EXAMPLE_SET_H_
#define TESSERA_DATA_EXAMPLE_SET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/count_cache/verified_count_cache.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"

namespace tessera {

// Examples in host memory in the order of a model's inputs.
struct HostBatch {
  int64_t size = 0;
  std::vector<std::vector<float>> dense;  // per dense input, [size, elems]
  // Per sparse input: example b's ids are ids[offsets[b] .. offsets[b+1]).
  std::vector<std::vector<int64_t>> offsets, ids;
  std::vector<int32_t> class_labels;  // label kind CLASS_INDEX
  std::vector<float> labels;          // label kinds BINARY and REAL
  // False when the set has no labels (examples to predict): the labels
  // above are then zeros, so the layer graph runs unchanged, and mean
  // nothing.
  bool labeled = true;
};

// Whether a data set must carry labels: training and evaluation need them;
// prediction reads new examples, which may have none (a Criteo file without
// its label column, IDX images without a labels file).
enum class LabelUse { kRequired, kOptional };

// A slice of a data set's examples, held in memory.
//
// Thread safety: Gather is const and may run concurrently.
class ExampleSet {
 public:
  virtual ~ExampleSet() = default;
  virtual int64_t size() const = 0;
  // False for examples loaded without labels (LabelUse::kOptional).
  virtual bool has_labels() const = 0;
  // Copies examples `indices` (into this slice, repeats allowed) into
  // *batch, reusing its buffers. OutOfRange names an index outside
  // [0, size()); *batch is then unspecified.
  virtual absl::Status Gather(absl::Span<const int64_t> indices,
                              HostBatch* batch) const = 0;
};

// Examples in the training (`train`) or test files of `data`, after the
// job's cap (train_examples, test_examples), each file read through to
// verify its count. With a `cache`, a file it counted before and unchanged
// since is not read again.
absl::StatusOr<int64_t> CountExamples(const DataConfig& data, bool train,
                                      VerifiedCountCache* cache = nullptr);

// As CountExamples, but an IDX file's count is the one its header
// declares, unverified: for a reader that verifies what it loads
// (LoadExamples fails on a file shorter than its header claims) and
// allocates nothing by the count. Other formats declare no count: they
// are counted as CountExamples does.
absl::StatusOr<int64_t> DeclaredExamples(const DataConfig& data, bool train,
                                         VerifiedCountCache* cache = nullptr);

// Loads examples [first, first + count) of the training or test files of
// `data` as `model`'s inputs. InvalidArgument names an input the format
// cannot provide (CheckDataFits), a file whose examples do not have the
// input's size, or a labels file left unset when labels are required; the
// readers' errors name the file and the bad entry. With
// LabelUse::kOptional, an IDX set with no labels file (empty path) and a
// Criteo file without the label column load with has_labels() false.
absl::StatusOr<std::unique_ptr<ExampleSet>> LoadExamples(
    const DataConfig& data, const ModelDef& model, bool train, int64_t first,
    int64_t count, LabelUse labels = LabelUse::kRequired);

}  // namespace tessera

#endif  // TESSERA_DATA_EXAMPLE_SET_H_
