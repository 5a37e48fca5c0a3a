// How a job's data feeds a model: the model's inputs (proto/model.proto)
// mapped to the features or columns its DataConfig names, the CSV options
// it gives, and parsed examples laid out as the HostBatch the layer graph
// trains on.

#ifndef TESSERA_DATA_STREAM_EXAMPLE_LAYOUT_H_
#define TESSERA_DATA_STREAM_EXAMPLE_LAYOUT_H_

#include "absl/status/statusor.h"
#include "data/example_set.h"
#include "data/records/csv_parser.h"
#include "data/records/example_schema.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"

namespace tessera {

// Each model input reads the features DataConfig.inputs names for it, or
// the feature of its own name; the label reads data.label_feature.
// InvalidArgument names a DataConfig.inputs entry that names no model
// input, a sparse input given more than one feature, a dense input with
// no shape, or an unset label_feature.
absl::StatusOr<ExampleSchema> ExampleSchemaOf(const ModelDef& model,
                                              const DataConfig& data);

// InvalidArgument when the delimiter is not one byte ("\\t" is a tab).
absl::StatusOr<CsvOptions> CsvOptionsOf(const CsvFormat& csv);

// Empties *batch for examples of `schema` (keeping its buffers).
void StartBatch(const ExampleSchema& schema, HostBatch* batch);

// Appends `example` to *batch.
void AppendToBatch(const ExampleSchema& schema, const ParsedExample& example,
                   HostBatch* batch);

}  // namespace tessera

#endif  // TESSERA_DATA_STREAM_EXAMPLE_LAYOUT_H_
