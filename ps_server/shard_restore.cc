// Restoring (RestoreShardCheckpoint); saving is in shard_checkpoint.cc.
//
// Plan, then read, then swap: every shard this server holds is matched to
// the saved shards it draws from; each file those live in is read once,
// front to back, scattering the entries needed into per-shard temporaries;
// only when every file verified (and matched the manifest) and every dense
// row is covered are the temporaries swapped into the shards.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_file.h"
#include "common/optimizer/row_precision.h"
#include "partitioners/hash_routing.h"
#include "ps_server/shard_checkpoint.h"

namespace tessera {
namespace {

// A shard of this server and what it will be restored to.
struct Target {
  StoredShard stored;
  const CheckpointVariable* variable = nullptr;
  std::vector<std::string> slots;  // its optimizer's, in slot order
  // Dense: rows [row_begin, row_begin + rows) of row_elements floats.
  int64_t row_begin = 0;
  int64_t rows = 0;
  int64_t row_elements = 0;
  ShardState dense;
  std::vector<std::pair<int64_t, int64_t>> covered;  // variable rows
  HashTableState hash;
  bool has_counts = false;  // version/updates/step set from a source yet
};

// One saved shard's entry, read.
struct LoadedEntry {
  std::vector<int64_t> ids;
  std::vector<float> values;
  absl::flat_hash_map<std::string, std::vector<float>> slots;  // by name
  int64_t version = 0;
  int64_t updates = 0;
  int64_t step = 0;
  std::vector<int64_t> steps_unseen;
  std::vector<int32_t> pushes;
  std::vector<uint8_t> swept;
};

// Where one saved shard's entry is needed.
struct Need {
  const CheckpointVariable* variable = nullptr;
  const CheckpointShard* saved = nullptr;
  std::vector<Target*> targets;
};

using FilePlan = std::map<std::string, Need>;  // by entry name

std::string DimsText(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::vector<int64_t> DimsOf(const TensorShape& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

// Rows along axis 0 (1 for a scalar) and floats per row.
int64_t RowsOf(const std::vector<int64_t>& dims) {
  return dims.empty() ? 1 : dims[0];
}
int64_t RowElementsOf(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// Checks the variable of `t` against the checkpoint's and fills in the
// target's geometry and staging buffers.
absl::Status PlanTarget(
    const std::string& checkpoint,
    const absl::flat_hash_map<std::string, const CheckpointVariable*>& vars,
    Target* t) {
  const ShardDef& def = t->stored.def();
  const bool is_hash = t->stored.table != nullptr;
  auto it = vars.find(def.variable());
  if (it == vars.end()) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", checkpoint,
                                            " has no variable ", def.variable(),
                                            " (for shard ", def.name(), ")"));
  }
  const CheckpointVariable& v = *it->second;
  t->variable = &v;
  auto differs = [&](auto... what) {
    return absl::FailedPreconditionError(
        absl::StrCat("variable ", def.variable(), " in checkpoint ", checkpoint,
                     ": ", what...));
  };
  const char* kind = is_hash ? kHashKind : kDenseKind;
  if (v.kind() != kind) {
    return differs("it is a '", v.kind(), "' variable there but a '", kind,
                   "' one here");
  }
  if (v.dtype() != def.dtype()) {
    return differs("dtype ", DataType_Name(v.dtype()), " there but ",
                   DataType_Name(def.dtype()), " here");
  }
  const Optimizer& optimizer =
      is_hash ? t->stored.table->optimizer() : t->stored.shard->optimizer();
  t->slots = CheckpointSlotNames(optimizer);
  const std::string saved_slots =
      absl::StrCat("[", absl::StrJoin(v.slots(), ","), "]");
  for (const std::string& slot : t->slots) {
    if (std::find(v.slots().begin(), v.slots().end(), slot) ==
        v.slots().end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", checkpoint, " has no slot '", slot, "' for variable ",
          def.variable(), ": it was saved with slots ", saved_slots,
          ", the optimizer here is ", optimizer.name()));
    }
  }
  for (const std::string& slot : v.slots()) {
    if (std::find(t->slots.begin(), t->slots.end(), slot) == t->slots.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", checkpoint, " has slot '", slot, "' for variable ",
          def.variable(), ", which optimizer ", optimizer.name(),
          " here does not have (the optimizer changed?)"));
    }
  }
  if (is_hash) {
    const int64_t dim = t->stored.table->row_elements();
    for (const CheckpointShard& saved : v.shards()) {
      if (saved.shape().dims_size() != 2 || saved.shape().dims(1) != dim) {
        return differs("saved shard ", saved.entry(), " has shape ",
                       DimsText(DimsOf(saved.shape())), ", rows of ", dim,
                       " floats here");
      }
    }
    t->hash.slots.resize(t->slots.size());
    return absl::OkStatus();
  }
  const std::vector<int64_t> var_dims = DimsOf(def.variable_shape());
  if (DimsOf(v.shape()) != var_dims) {
    return differs("shape ", DimsText(DimsOf(v.shape())), " there but ",
                   DimsText(var_dims), " here");
  }
  const Shard& shard = *t->stored.shard;
  t->row_begin = def.row_offset();
  t->rows = shard.rows();
  t->row_elements = shard.row_elements();
  t->dense.values.resize(shard.num_elements());
  t->dense.slots.clear();
  for (size_t k = 0; k < t->slots.size(); ++k) {
    t->dense.slots.emplace_back(shard.rows() *
                                shard.slot_row_elements(static_cast<int>(k)));
  }
  return absl::OkStatus();
}

// Adds the saved shards `t` draws from to `plan`, by file and entry.
absl::Status PlanSources(
    const std::string& checkpoint,
    const absl::flat_hash_map<std::string, const CheckpointFile*>& files,
    Target* t, std::map<std::string, FilePlan>* plan) {
  const CheckpointVariable& v = *t->variable;
  const bool is_hash = t->stored.table != nullptr;
  for (const CheckpointShard& saved : v.shards()) {
    if (!is_hash) {
      const std::vector<int64_t> dims = DimsOf(saved.shape());
      const int64_t begin = saved.row_offset();
      const int64_t end = begin + RowsOf(dims);
      // Every dimension but the first must be the variable's: a product
      // alone would take a transposed [5,6,4] for a [10,4,6] variable.
      bool same_rows =
          dims.size() == static_cast<size_t>(v.shape().dims_size());
      for (size_t d = 1; same_rows && d < dims.size(); ++d) {
        same_rows = dims[d] == v.shape().dims(static_cast<int>(d));
      }
      if (!same_rows || RowElementsOf(dims) != t->row_elements || begin < 0) {
        return absl::DataLossError(absl::StrCat(
            "checkpoint ", checkpoint, ": saved shard ", saved.entry(),
            " of variable ", v.name(), " has shape ", DimsText(dims),
            " at row ", begin, ", not a row range of the variable"));
      }
      if (end <= t->row_begin || begin >= t->row_begin + t->rows) continue;
    }
    if (files.find(saved.file()) == files.end()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint ", checkpoint, ": saved shard ", saved.entry(),
          " of variable ", v.name(), " is in file '", saved.file(),
          "', which the manifest does not list"));
    }
    Need& need = (*plan)[saved.file()][saved.entry()];
    if (need.saved != nullptr && need.saved != &saved) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", checkpoint, ": the manifest lists entry ",
                       saved.entry(), " of file ", saved.file(), " twice"));
    }
    need.variable = &v;
    need.saved = &saved;
    need.targets.push_back(t);
  }
  return absl::OkStatus();
}

// Reads array `index` of the reader's entry as T into `out`, after checking
// its dtype and (unless `dims` is null) its shape.
template <typename T>
absl::Status ReadChecked(CheckpointReader& reader, int index,
                         const std::vector<int64_t>* dims,
                         std::vector<T>* out) {
  const CheckpointEntryInfo& e = reader.entry();
  const CheckpointArrayInfo& a = e.arrays[index];
  if (a.dtype != CheckpointDtypeOf<T>() || (dims && a.dims != *dims)) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", reader.label(), ": entry '", e.name, "' array '", a.key,
        "' is ", CheckpointDtypeName(a.dtype), " ", DimsText(a.dims),
        ", expected ", CheckpointDtypeName(CheckpointDtypeOf<T>()), " ",
        dims ? DimsText(*dims) : "of any shape"));
  }
  return reader.ReadArray(index, out);
}

// Reads the "values" array (at `index`) as fp32 into `out`, after checking
// its shape: float32 as it is, an fp16/bf16 table's 2-byte values widened
// (exact). The caller rounds them into its own precision.
absl::Status ReadValues(CheckpointReader& reader, int index,
                        const std::vector<int64_t>& dims,
                        std::vector<float>* out) {
  const CheckpointEntryInfo& e = reader.entry();
  const CheckpointArrayInfo& a = e.arrays[index];
  const absl::StatusOr<RowPrecision> precision = RowPrecisionOfValues(a.dtype);
  if (!precision.ok() || a.dims != dims) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", reader.label(), ": entry '", e.name, "' array '", a.key,
        "' is ", CheckpointDtypeName(a.dtype), " ", DimsText(a.dims),
        ", expected float32, float16 or bfloat16 ", DimsText(dims)));
  }
  if (*precision == ROW_FP32) return reader.ReadArray(index, out);
  std::vector<uint16_t> stored(static_cast<size_t>(a.num_elements()));
  if (absl::Status s = reader.ReadArray(
          index, absl::Span<char>(reinterpret_cast<char*>(stored.data()),
                                  stored.size() * sizeof(uint16_t)));
      !s.ok()) {
    return s;
  }
  out->resize(stored.size());
  WidenRow(*precision, stored.data(), out->data(),
           static_cast<int64_t>(stored.size()));
  return absl::OkStatus();
}

// Reads the reader's current entry, the saved shard `need` describes.
absl::Status LoadEntry(CheckpointReader& reader, const Need& need,
                       LoadedEntry* out) {
  const CheckpointEntryInfo& e = reader.entry();
  const bool is_hash = need.variable->kind() == kHashKind;
  const std::vector<int64_t> dims = DimsOf(need.saved->shape());
  const std::vector<int64_t> one = {1};
  const std::vector<int64_t> per_row = {RowsOf(dims)};
  absl::flat_hash_set<std::string> wanted = {kCheckpointValuesKey};
  for (const std::string& slot : need.variable->slots()) {
    wanted.insert(CheckpointSlotKey(slot));
  }
  if (is_hash) {
    wanted.insert(kCheckpointIdsKey);
    wanted.insert(kCheckpointStepKey);
  } else {
    wanted.insert(kCheckpointVersionKey);
    wanted.insert(kCheckpointUpdatesKey);
  }
  for (const std::string& key : wanted) {
    if (e.FindArray(key) < 0) {
      return absl::DataLossError(absl::StrCat("checkpoint ", reader.label(),
                                              ": entry '", e.name,
                                              "' has no array '", key, "'"));
    }
  }
  // In file order: the reader only goes forward.
  for (int i = 0; i < static_cast<int>(e.arrays.size()); ++i) {
    const std::string& key = e.arrays[i].key;
    absl::Status s;
    std::vector<int64_t> scalar;
    if (key == kCheckpointValuesKey) {
      s = ReadValues(reader, i, dims, &out->values);
    } else if (key.rfind("slot/", 0) == 0 && wanted.contains(key)) {
      // Element-wise slots are shaped as the values; a row-wise one
      // (rowwise_adagrad) is [rows, its floats per row].
      const std::vector<int64_t>& a = e.arrays[i].dims;
      const bool row_wise = a.size() == 2 && a[0] == RowsOf(dims) && a[1] == 1;
      s = ReadChecked(reader, i, row_wise ? &a : &dims,
                      &out->slots[key.substr(5)]);
    } else if (is_hash && key == kCheckpointIdsKey) {
      s = ReadChecked(reader, i, &per_row, &out->ids);
    } else if (is_hash && key == kCheckpointStepsUnseenKey) {
      s = ReadChecked(reader, i, &per_row, &out->steps_unseen);
    } else if (is_hash && key == kCheckpointPushesKey) {
      s = ReadChecked(reader, i, &per_row, &out->pushes);
    } else if (is_hash && key == kCheckpointSweptKey) {
      s = ReadChecked(reader, i, &per_row, &out->swept);
    } else if (key == kCheckpointStepKey || key == kCheckpointVersionKey ||
               key == kCheckpointUpdatesKey) {
      s = ReadChecked(reader, i, &one, &scalar);
      // Counts start at 0 and grow by one per update: anything negative or
      // near overflow is damage, and would make Adam's 1 - beta^t divide by
      // zero or overflow.
      constexpr int64_t kMaxCount = int64_t{1} << 62;
      if (s.ok() && (scalar[0] < 0 || scalar[0] >= kMaxCount)) {
        s = absl::DataLossError(
            absl::StrCat("checkpoint ", reader.label(), ": entry '",
                         reader.entry().name, "' array '", key, "' holds ",
                         scalar[0], ", not a count in [0, 2^62)"));
      }
      if (s.ok()) {
        int64_t& field = key == kCheckpointStepKey      ? out->step
                         : key == kCheckpointVersionKey ? out->version
                                                        : out->updates;
        field = scalar[0];
      }
    }  // anything else is skipped (and still checksummed) by Next()
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Copies what `t` needs of a loaded dense entry.
void ScatterDense(const LoadedEntry& in, const CheckpointShard& saved,
                  Target* t) {
  const int64_t begin = saved.row_offset();
  const int64_t end = begin + RowsOf(DimsOf(saved.shape()));
  const int64_t lo = std::max(begin, t->row_begin);
  const int64_t hi = std::min(end, t->row_begin + t->rows);
  const int64_t re = t->row_elements;
  const int64_t src = (lo - begin) * re;
  const int64_t dst = (lo - t->row_begin) * re;
  const int64_t n = (hi - lo) * re;
  std::copy_n(in.values.begin() + src, n, t->dense.values.begin() + dst);
  const Shard& shard = *t->stored.shard;
  for (size_t k = 0; k < t->slots.size(); ++k) {
    const std::vector<float>& slot = in.slots.at(t->slots[k]);
    const int64_t e = shard.slot_row_elements(static_cast<int>(k));
    std::copy_n(slot.begin() + (lo - begin) * e, (hi - lo) * e,
                t->dense.slots[k].begin() + (lo - t->row_begin) * e);
  }
  t->dense.version =
      t->has_counts ? std::max(t->dense.version, in.version) : in.version;
  t->dense.updates =
      t->has_counts ? std::max(t->dense.updates, in.updates) : in.updates;
  t->has_counts = true;
  t->covered.emplace_back(lo, hi);
}

// Appends the rows of a loaded hash-table entry that `t` owns. The saved
// step_unseen counts are relative to the saved table's step; they are kept
// relative to the step the new table gets.
void ScatterHash(const LoadedEntry& in, Target* t) {
  const ShardDef& def = t->stored.def();
  const int num_shards = def.num_shards();
  const int64_t dim = t->stored.table->row_elements();
  HashTableState& h = t->hash;
  h.step = t->has_counts ? std::max(h.step, in.step) : in.step;
  t->has_counts = true;
  std::vector<const std::vector<float>*> slots;
  std::vector<int64_t> slot_elements;
  for (size_t k = 0; k < t->slots.size(); ++k) {
    slots.push_back(&in.slots.at(t->slots[k]));
    slot_elements.push_back(
        t->stored.table->slot_row_elements(static_cast<int>(k)));
  }
  for (size_t i = 0; i < in.ids.size(); ++i) {
    const int64_t id = in.ids[i];
    if (num_shards > 1 && HashShardOf(id, num_shards) != def.index()) continue;
    h.ids.push_back(id);
    const size_t at = i * dim;
    h.values.insert(h.values.end(), in.values.begin() + at,
                    in.values.begin() + at + dim);
    for (size_t k = 0; k < slots.size(); ++k) {
      const size_t from = i * slot_elements[k];
      h.slots[k].insert(h.slots[k].end(), slots[k]->begin() + from,
                        slots[k]->begin() + from + slot_elements[k]);
    }
    const int64_t unseen = in.steps_unseen.empty() ? 0 : in.steps_unseen[i];
    h.steps_unseen.push_back(
        static_cast<uint32_t>(std::clamp<int64_t>(unseen, 0, UINT32_MAX)));
    h.pushes.push_back(in.pushes.empty()
                           ? 0
                           : static_cast<uint32_t>(std::max(0, in.pushes[i])));
    h.swept.push_back(in.swept.empty() ? 0 : in.swept[i]);
  }
}

// Reads `file` once, scattering every entry in `plan` to its targets, and
// checks it against the manifest.
absl::Status ReadFile(const std::string& directory, const CheckpointFile& file,
                      const FilePlan& plan) {
  absl::StatusOr<std::unique_ptr<CheckpointReader>> opened =
      CheckpointReader::Open(absl::StrCat(directory, "/", file.name()));
  if (!opened.ok()) return opened.status();
  CheckpointReader& reader = **opened;
  absl::flat_hash_set<std::string> seen;
  while (true) {
    absl::StatusOr<bool> more = reader.Next();
    if (!more.ok()) return more.status();
    if (!*more) break;
    const std::string& name = reader.entry().name;
    auto it = plan.find(name);
    if (it == plan.end()) continue;
    if (!seen.insert(name).second) {
      return absl::DataLossError(absl::StrCat("checkpoint ", reader.label(),
                                              ": entry '", name, "' repeats"));
    }
    const Need& need = it->second;
    LoadedEntry loaded;
    if (absl::Status s = LoadEntry(reader, need, &loaded); !s.ok()) return s;
    for (Target* t : need.targets) {
      if (t->stored.table != nullptr) {
        ScatterHash(loaded, t);
      } else {
        ScatterDense(loaded, *need.saved, t);
      }
    }
  }
  const CheckpointFileSummary& summary = reader.summary();
  if (summary.size_bytes != file.size_bytes() ||
      summary.crc32c != file.crc32c()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", reader.label(), ": ", summary.size_bytes,
        " bytes with CRC32C ", summary.crc32c, ", but the manifest records ",
        file.size_bytes(), " bytes with CRC32C ", file.crc32c(),
        " (a file of another checkpoint?)"));
  }
  for (const auto& [name, need] : plan) {
    if (!seen.contains(name)) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", reader.label(), " has no entry '", name,
                       "' (saved shard ", need.saved->index(), " of variable ",
                       need.variable->name(), ")"));
    }
  }
  return absl::OkStatus();
}

// DataLoss naming the first rows of a dense target no saved shard covered.
absl::Status CheckCovered(const std::string& checkpoint, Target* t) {
  std::sort(t->covered.begin(), t->covered.end());
  int64_t next = t->row_begin;
  const int64_t end = t->row_begin + t->rows;
  for (const auto& [lo, hi] : t->covered) {
    if (lo > next) break;
    next = std::max(next, hi);
  }
  if (next >= end) return absl::OkStatus();
  int64_t gap_end = end;
  for (const auto& [lo, hi] : t->covered) {
    if (lo > next) {
      gap_end = lo;
      break;
    }
  }
  return absl::DataLossError(
      absl::StrCat("checkpoint ", checkpoint, " has no rows [", next, ", ",
                   gap_end, ") of variable ", t->variable->name(),
                   " (needed by shard ", t->stored.def().name(), ")"));
}

// The manifest's variables and files by name; an error for a variable
// listed twice or a file name that is not a plain name.
absl::Status IndexManifest(
    const CheckpointManifest& manifest, const std::string& checkpoint,
    absl::flat_hash_map<std::string, const CheckpointVariable*>* variables,
    absl::flat_hash_map<std::string, const CheckpointFile*>* files) {
  for (const CheckpointVariable& v : manifest.variables()) {
    if (!variables->emplace(v.name(), &v).second) {
      return absl::DataLossError(absl::StrCat("checkpoint ", checkpoint,
                                              ": the manifest lists variable ",
                                              v.name(), " twice"));
    }
  }
  for (const CheckpointFile& f : manifest.files()) {
    if (!IsPlainFileName(f.name())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", checkpoint, ": the manifest names file '", f.name(),
          "', which is not a plain name inside the checkpoint directory"));
    }
    files->emplace(f.name(), &f);
  }
  return absl::OkStatus();
}

// Every table target's rows as a new table in (*built)[i] (dense
// targets: their coverage checked), before anything is swapped in.
absl::Status BuildTables(const std::string& checkpoint,
                         std::vector<Target>& targets,
                         std::vector<std::unique_ptr<HashTable>>* built) {
  for (size_t i = 0; i < targets.size(); ++i) {
    Target& t = targets[i];
    if (t.stored.table == nullptr) {
      if (absl::Status s = CheckCovered(checkpoint, &t); !s.ok()) return s;
      continue;
    }
    absl::StatusOr<std::unique_ptr<HashTable>> table =
        t.stored.table->BuildFromState(t.hash);
    if (!table.ok()) {
      // Sizes and routing are right by construction; a repeated id means
      // two saved shards hold the same row.
      if (absl::IsInvalidArgument(table.status())) {
        return absl::DataLossError(
            absl::StrCat("checkpoint ", checkpoint, ", variable ",
                         t.variable->name(), ": ", table.status().message()));
      }
      return table.status();
    }
    (*built)[i] = *std::move(table);
    t.hash = HashTableState();  // its rows now live in (*built)[i]
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RestoreShardCheckpoint(const CheckpointManifest& manifest,
                                    const std::string& directory,
                                    ShardStore* store,
                                    RestoreShardsResponse* response) {
  const std::string& checkpoint = directory;
  absl::flat_hash_map<std::string, const CheckpointVariable*> variables;
  absl::flat_hash_map<std::string, const CheckpointFile*> files;
  if (absl::Status s = IndexManifest(manifest, checkpoint, &variables, &files);
      !s.ok()) {
    return s;
  }

  std::vector<StoredShard> shards = store->List();
  std::vector<Target> targets(shards.size());  // never resized: Need points
  std::map<std::string, FilePlan> plan;        // by file name
  for (size_t i = 0; i < shards.size(); ++i) {
    Target* t = &targets[i];
    t->stored = shards[i];
    if (absl::Status s = PlanTarget(checkpoint, variables, t); !s.ok()) {
      return s;
    }
    if (absl::Status s = PlanSources(checkpoint, files, t, &plan); !s.ok()) {
      return s;
    }
  }
  for (const auto& [name, file_plan] : plan) {
    if (absl::Status s = ReadFile(directory, *files.at(name), file_plan);
        !s.ok()) {
      return s;
    }
  }

  // Everything is read and verified; build what can still fail, then swap.
  std::vector<std::unique_ptr<HashTable>> built(targets.size());
  if (absl::Status s = BuildTables(checkpoint, targets, &built); !s.ok()) {
    return s;
  }
  int64_t rows = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    Target& t = targets[i];
    if (t.stored.table != nullptr) {
      rows += built[i]->rows();
      t.stored.table->TakeRowsFrom(*built[i]);
      continue;
    }
    rows += t.rows;
    // Cannot fail: the state was sized from this very shard.
    if (absl::Status s = t.stored.shard->RestoreState(std::move(t.dense));
        !s.ok()) {
      return absl::InternalError(s.message());
    }
  }
  response->set_rows_restored(rows);
  response->set_shards_restored(static_cast<int32_t>(targets.size()));
  return absl::OkStatus();
}

}  // namespace tessera
