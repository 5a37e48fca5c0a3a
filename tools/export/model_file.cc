#include "tools/export/model_file.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_file.h"
#include "common/checkpoint/checkpoint_format.h"
#include "common/model/model_presets.h"
#include "tools/export/onnx_file_sniff.h"

namespace tessera {

absl::Status WriteModelFile(const TrainedModel& model,
                            const std::string& path) {
  absl::StatusOr<std::unique_ptr<CheckpointWriter>> writer =
      CheckpointWriter::Create(path);
  if (!writer.ok()) return writer.status();
  const std::string job = model.job.SerializeAsString();
  const int64_t step = model.global_step;
  const CheckpointArrayView header[] = {
      CheckpointArrayView::Of<char>("job", job,
                                    {static_cast<int64_t>(job.size())}),
      CheckpointArrayView::Of<int64_t>("global_step",
                                       absl::MakeConstSpan(&step, 1), {1})};
  if (absl::Status s = (*writer)->WriteEntry(kModelFileHeaderEntry, header);
      !s.ok()) {
    return s;
  }
  for (const TrainedVariable& v : model.variables) {
    std::vector<CheckpointArrayView> arrays = {
        CheckpointArrayView::Of<float>("values", v.values, v.shape)};
    if (v.table && v.vocab_size == 0) {
      arrays.push_back(CheckpointArrayView::Of<int64_t>(
          "ids", v.ids, {static_cast<int64_t>(v.ids.size())}));
    }
    if (absl::Status s = (*writer)->WriteEntry(v.name, arrays); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<CheckpointFileSummary> done = (*writer)->Finish();
  return done.status();
}

namespace {

// InvalidArgument when `path` is some other kind of file (its first bytes
// are not a checkpoint file's), saying what it looks like when it can.
absl::Status CheckIsCheckpointFile(const std::string& path) {
  char magic[sizeof(checkpoint_internal::kHeaderMagic)];
  std::ifstream in(path, std::ios::binary);
  // A short or unreadable file is the reader's to report.
  if (!in.read(magic, sizeof(magic))) return absl::OkStatus();
  if (std::memcmp(magic, checkpoint_internal::kHeaderMagic, sizeof(magic)) ==
      0) {
    return absl::OkStatus();
  }
  std::string message = absl::StrCat(
      path,
      " is not a Tessera checkpoint or model file (give a checkpoint root, a "
      "ckpt-<step> folder, or a file tessera_export --format=tessera wrote)");
  if (LooksLikeOnnxModel(path)) {
    absl::StrAppend(&message,
                    "; it looks like an ONNX model, which ONNX Runtime runs: "
                    "give the checkpoint it was exported from instead");
  }
  return absl::InvalidArgumentError(message);
}

// The first entry: the job description and the step it was trained to.
absl::Status ReadHeader(const std::string& path, CheckpointReader& reader,
                        TrainedModel* m) {
  const CheckpointEntryInfo& e = reader.entry();
  const int job = e.FindArray("job"), step = e.FindArray("global_step");
  if (e.name != kModelFileHeaderEntry || job < 0 || step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is a checkpoint file but not a Tessera model file ",
        "(tessera_export --format=tessera writes those)"));
  }
  std::vector<uint8_t> bytes;
  std::vector<int64_t> steps;
  if (absl::Status s = reader.ReadArray(job, &bytes); !s.ok()) return s;
  if (absl::Status s = reader.ReadArray(step, &steps); !s.ok()) return s;
  if (!m->job.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
      steps.size() != 1) {
    return absl::DataLossError(
        absl::StrCat(reader.label(), ": the job description is damaged"));
  }
  m->global_step = steps[0];
  return absl::OkStatus();
}

absl::StatusOr<TrainedVariable> ReadVariable(CheckpointReader& reader) {
  const CheckpointEntryInfo& e = reader.entry();
  TrainedVariable v;
  v.name = e.name;
  const int values = e.FindArray("values"), ids = e.FindArray("ids");
  if (values < 0) {
    return absl::DataLossError(absl::StrCat(reader.label(), ": variable ",
                                            e.name, " has no 'values' array"));
  }
  v.shape = e.arrays[values].dims;
  // In file order: the reader only goes forward.
  if (ids >= 0 && ids < values) {
    if (absl::Status s = reader.ReadArray(ids, &v.ids); !s.ok()) return s;
  }
  if (absl::Status s = reader.ReadArray(values, &v.values); !s.ok()) {
    return s;
  }
  if (ids > values) {
    if (absl::Status s = reader.ReadArray(ids, &v.ids); !s.ok()) return s;
  }
  return v;
}

// Moves the variables the model's graph needs from *read into m, in the
// graph's order, each checked against the shape the graph gives it.
absl::Status TakeVariables(
    const std::string& path,
    absl::flat_hash_map<std::string, TrainedVariable>* read, TrainedModel* m) {
  for (const VariableDef& def : m->graph.variables) {
    auto it = read->find(def.name);
    if (it == read->end()) {
      return absl::NotFoundError(absl::StrCat(
          path, " has no variable ", def.name, ", which the model needs"));
    }
    TrainedVariable& v = it->second;
    v.table = def.sparse;
    v.vocab_size = def.sparse ? def.shape[0] : 0;
    const bool growing = def.sparse && def.shape[0] == 0;
    const bool fits = growing
                          ? v.shape.size() == 2 && v.shape[1] == def.shape[1] &&
                                static_cast<int64_t>(v.ids.size()) == v.shape[0]
                          : v.shape == def.shape;
    if (!fits) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": variable ", def.name, " has shape [",
                       absl::StrJoin(v.shape, ","), "], the model needs [",
                       absl::StrJoin(def.shape, ","), "]"));
    }
    m->index[def.name] = static_cast<int>(m->variables.size());
    m->variables.push_back(std::move(v));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainedModel> ReadModelFile(const std::string& path) {
  if (absl::Status s = CheckIsCheckpointFile(path); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<CheckpointReader>> opened =
      CheckpointReader::Open(path);
  if (!opened.ok()) return opened.status();
  CheckpointReader& reader = **opened;
  TrainedModel m;
  m.checkpoint = path;
  bool header = false;
  absl::flat_hash_map<std::string, TrainedVariable> read;
  while (true) {
    absl::StatusOr<bool> more = reader.Next();
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (!header) {
      if (absl::Status s = ReadHeader(path, reader, &m); !s.ok()) return s;
      header = true;
      continue;
    }
    absl::StatusOr<TrainedVariable> v = ReadVariable(reader);
    if (!v.ok()) return v.status();
    std::string name = v->name;
    read[name] = *std::move(v);
  }
  if (!header) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no model (an empty checkpoint file)"));
  }
  absl::StatusOr<ModelDef> model = JobModel(m.job);
  if (!model.ok()) return model.status();
  m.model = *std::move(model);
  absl::StatusOr<ModelGraph> graph =
      BuildModelGraph(m.model, m.job.schedule().seed());
  if (!graph.ok()) return graph.status();
  m.graph = *std::move(graph);
  if (absl::Status s = TakeVariables(path, &read, &m); !s.ok()) return s;
  return m;
}

}  // namespace tessera
