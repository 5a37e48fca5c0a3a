#include "tools/keras/keras_archive.h"

#include <hdf5.h>
#include <zip.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/io/atomic_file.h"
#include "common/io/bounded_file_read.h"

namespace tessera {
namespace {

// A model file holds weights of any size; this bounds a mistaken path.
constexpr size_t kMaxFileBytes = size_t{8} << 30;
constexpr size_t kMaxJsonBytes = size_t{64} << 20;

// Closes an HDF5 handle when it leaves scope.
class H5Handle {
 public:
  H5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Handle() {
    if (id_ >= 0) close_(id_);
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// HDF5 prints its own error stack by default; errors are reported here.
void SilenceHdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

absl::StatusOr<std::string> ReadZipMember(zip_t* zip, const char* name,
                                          const std::string& what) {
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat(zip, name, 0, &stat) != 0 || !(stat.valid & ZIP_STAT_SIZE)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the archive has no ", name,
                     " (a .keras file holds config.json, metadata.json and "
                     "model.weights.h5)"));
  }
  if (stat.size > kMaxFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", name, " is larger than ", kMaxFileBytes,
                     " bytes, the most accepted"));
  }
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> file(
      zip_fopen(zip, name, 0), zip_fclose);
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot open ", name, ": ", zip_strerror(zip)));
  }
  std::string data(stat.size, '\0');
  zip_int64_t got = zip_fread(file.get(), data.data(), stat.size);
  if (got < 0 || static_cast<zip_uint64_t>(got) != stat.size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", name, " is damaged (read ", got, " of ",
                     stat.size, " bytes)"));
  }
  return data;
}

absl::StatusOr<nlohmann::json> ParseJson(const std::string& text,
                                         const std::string& what) {
  nlohmann::json json =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not valid JSON"));
  }
  return json;
}

// The string attribute `name` of `object` ("" when absent).
std::string StringAttribute(hid_t object, const char* name) {
  if (H5Aexists(object, name) <= 0) return "";
  H5Handle attr(H5Aopen(object, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) return "";
  H5Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) return "";
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* value = nullptr;
    if (H5Aread(attr.get(), mem.get(), &value) < 0 || value == nullptr) {
      return "";
    }
    std::string out(value);
    H5free_memory(value);
    return out;
  }
  const size_t size = H5Tget_size(type.get());
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0) return "";
  out.resize(std::strlen(out.c_str()));
  return out;
}

// The names of the links in `group`, in HDF5's name order.
std::vector<std::string> Members(hid_t group) {
  std::vector<std::string> names;
  H5G_info_t info;
  if (H5Gget_info(group, &info) < 0) return names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = H5Lget_name_by_idx(
        group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (size < 0) continue;
    std::string name(static_cast<size_t>(size) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                       name.size(), H5P_DEFAULT);
    name.resize(static_cast<size_t>(size));
    names.push_back(std::move(name));
  }
  return names;
}

absl::StatusOr<KerasArray> ReadDataset(hid_t group, const std::string& name,
                                       const std::string& what) {
  H5Handle set(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!set.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot open dataset ", name));
  }
  H5Handle type(H5Dget_type(set.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_FLOAT) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": variable ", name,
                     " is not floating point (Tessera trains "
                     "float32 variables)"));
  }
  H5Handle space(H5Dget_space(set.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": variable ", name, " has rank ", rank));
  }
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  KerasArray array;
  size_t count = 1;
  for (hsize_t d : dims) {
    array.shape.push_back(static_cast<int64_t>(d));
    count *= d;
  }
  array.values.resize(count);
  if (count > 0 && H5Dread(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                           H5P_DEFAULT, array.values.data()) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot read variable ", name));
  }
  return array;
}

absl::StatusOr<std::vector<KerasLayerWeights>> ReadWeights(
    std::string image, const std::string& what) {
  SilenceHdf5();
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_core(fapl.get(), 1 << 20, /*backing_store=*/0);
  H5Pset_file_image(fapl.get(), image.data(), image.size());
  H5Handle file(H5Fopen("model.weights.h5", H5F_ACC_RDONLY, fapl.get()),
                H5Fclose);
  if (!file.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": model.weights.h5 is not an HDF5 file"));
  }
  std::vector<KerasLayerWeights> out;
  if (H5Lexists(file.get(), "layers", H5P_DEFAULT) <= 0) return out;
  H5Handle layers(H5Gopen2(file.get(), "layers", H5P_DEFAULT), H5Gclose);
  for (const std::string& member : Members(layers.get())) {
    const std::string vars_path = member + "/vars";
    if (H5Lexists(layers.get(), member.c_str(), H5P_DEFAULT) <= 0 ||
        H5Lexists(layers.get(), vars_path.c_str(), H5P_DEFAULT) <= 0) {
      continue;
    }
    H5Handle vars(H5Gopen2(layers.get(), vars_path.c_str(), H5P_DEFAULT),
                  H5Gclose);
    KerasLayerWeights layer;
    layer.group = "layers/" + member;
    layer.layer = StringAttribute(vars.get(), "name");
    const std::vector<std::string> names = Members(vars.get());
    for (size_t i = 0; i < names.size(); ++i) {
      // Datasets are named 0, 1, ...; name order would put 10 before 2.
      const std::string index = std::to_string(i);
      if (H5Lexists(vars.get(), index.c_str(), H5P_DEFAULT) <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", layer.group, "/vars has no variable ",
                         index, " of ", names.size()));
      }
      absl::StatusOr<KerasArray> array =
          ReadDataset(vars.get(), index, absl::StrCat(what, ": ", layer.group));
      if (!array.ok()) return array.status();
      layer.vars.push_back(*std::move(array));
    }
    out.push_back(std::move(layer));
  }
  return out;
}

absl::Status WriteStringAttribute(hid_t object, const char* name,
                                  const std::string& value) {
  H5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT,
                           H5P_DEFAULT),
                H5Aclose);
  const char* data = value.c_str();
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), &data) < 0) {
    return absl::InternalError(
        absl::StrCat("HDF5: cannot write attribute ", name));
  }
  return absl::OkStatus();
}

// A group "<path>/vars" holding `arrays` as datasets 0, 1, ...
absl::Status WriteVars(hid_t file, const std::string& path,
                       const std::string& name,
                       const std::vector<KerasArray>& arrays) {
  H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  const std::string vars_path = path.empty() ? "vars" : path + "/vars";
  H5Handle vars(
      H5Gcreate2(file, vars_path.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Gclose);
  if (!vars.ok()) {
    return absl::InternalError(
        absl::StrCat("HDF5: cannot create group ", vars_path));
  }
  if (absl::Status s = WriteStringAttribute(vars.get(), "name", name);
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::vector<hsize_t> dims(arrays[i].shape.begin(), arrays[i].shape.end());
    H5Handle space(dims.empty()
                       ? H5Screate(H5S_SCALAR)
                       : H5Screate_simple(static_cast<int>(dims.size()),
                                          dims.data(), nullptr),
                   H5Sclose);
    const std::string index = std::to_string(i);
    H5Handle set(H5Dcreate2(vars.get(), index.c_str(), H5T_IEEE_F32LE,
                            space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 H5Dclose);
    if (!set.ok() || (!arrays[i].values.empty() &&
                      H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                               H5P_DEFAULT, arrays[i].values.data()) < 0)) {
      return absl::InternalError(
          absl::StrCat("HDF5: cannot write ", vars_path, "/", index));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WeightsImage(
    const std::vector<KerasLayerWeights>& weights,
    const std::string& model_name, const std::string& optimizer_name) {
  SilenceHdf5();
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_core(fapl.get(), 1 << 20, /*backing_store=*/0);
  H5Handle file(
      H5Fcreate("model.weights.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
      H5Fclose);
  if (!file.ok()) return absl::InternalError("HDF5: cannot create a file");
  for (const KerasLayerWeights& layer : weights) {
    if (absl::Status s =
            WriteVars(file.get(), layer.group, layer.layer, layer.vars);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = WriteVars(file.get(), "optimizer", optimizer_name, {});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WriteVars(file.get(), "", model_name, {}); !s.ok()) {
    return s;
  }
  H5Fflush(file.get(), H5F_SCOPE_GLOBAL);
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size < 0) return absl::InternalError("HDF5: cannot take the image");
  std::string image(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file.get(), image.data(), image.size()) != size) {
    return absl::InternalError("HDF5: cannot take the image");
  }
  return image;
}

}  // namespace

absl::StatusOr<KerasModelFile> ReadKerasModelFile(const std::string& path) {
  const std::string what = absl::StrCat("--model=", path);
  absl::StatusOr<std::string> bytes =
      ReadBoundedFile(path, kMaxFileBytes, what);
  if (!bytes.ok()) return bytes.status();
  KerasModelFile out;
  if (!absl::StartsWith(*bytes, "PK\x03\x04")) {
    if (bytes->size() > kMaxJsonBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": neither a .keras archive (zip) nor JSON"));
    }
    absl::StatusOr<nlohmann::json> json = ParseJson(*bytes, what);
    if (!json.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what,
                       ": neither a .keras archive (zip) nor the JSON of "
                       "model.to_json()"));
    }
    out.config = *std::move(json);
    return out;
  }
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source =
      zip_source_buffer_create(bytes->data(), bytes->size(), 0, &error);
  if (source == nullptr) {
    return absl::InternalError(
        absl::StrCat(what, ": ", zip_error_strerror(&error)));
  }
  std::unique_ptr<zip_t, void (*)(zip_t*)> zip(
      zip_open_from_source(source, ZIP_RDONLY, &error), zip_discard);
  if (zip == nullptr) {
    zip_source_free(source);
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": a damaged zip archive: ", zip_error_strerror(&error)));
  }
  absl::StatusOr<std::string> config =
      ReadZipMember(zip.get(), "config.json", what);
  if (!config.ok()) return config.status();
  absl::StatusOr<nlohmann::json> json =
      ParseJson(*config, absl::StrCat(what, ": config.json"));
  if (!json.ok()) return json.status();
  out.config = *std::move(json);
  absl::StatusOr<std::string> metadata =
      ReadZipMember(zip.get(), "metadata.json", what);
  if (metadata.ok()) {
    json = ParseJson(*metadata, absl::StrCat(what, ": metadata.json"));
    if (!json.ok()) return json.status();
    out.metadata = *std::move(json);
  }
  absl::StatusOr<std::string> weights =
      ReadZipMember(zip.get(), "model.weights.h5", what);
  if (!weights.ok()) return weights.status();
  absl::StatusOr<std::vector<KerasLayerWeights>> layers =
      ReadWeights(*std::move(weights), what);
  if (!layers.ok()) return layers.status();
  out.weights = *std::move(layers);
  out.has_weights = true;
  return out;
}

absl::Status WriteKerasArchive(const std::string& path,
                               const nlohmann::json& config,
                               const nlohmann::json& metadata,
                               const std::vector<KerasLayerWeights>& weights,
                               const std::string& model_name,
                               const std::string& optimizer_name) {
  absl::StatusOr<std::string> image =
      WeightsImage(weights, model_name, optimizer_name);
  if (!image.ok()) return image.status();
  const std::string config_text = config.dump();
  const std::string metadata_text = metadata.dump();
  const std::string tmp = path + ".tmp";
  std::remove(tmp.c_str());
  int error = 0;
  zip_t* zip = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  if (zip == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--output=", path, ": cannot create ", tmp));
  }
  // Keras writes metadata.json, config.json, model.weights.h5, stored.
  const std::pair<const char*, const std::string*> members[] = {
      {"metadata.json", &metadata_text},
      {"config.json", &config_text},
      {"model.weights.h5", &*image}};
  for (const auto& [name, data] : members) {
    zip_source_t* source =
        zip_source_buffer(zip, data->data(), data->size(), 0);
    zip_int64_t index = source == nullptr
                            ? -1
                            : zip_file_add(zip, name, source, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      if (source != nullptr) zip_source_free(source);
      const std::string why = zip_strerror(zip);
      zip_discard(zip);
      return absl::InternalError(
          absl::StrCat("--output=", path, ": cannot add ", name, ": ", why));
    }
    zip_set_file_compression(zip, index, ZIP_CM_STORE, 0);
  }
  if (zip_close(zip) != 0) {
    const std::string why = zip_strerror(zip);
    zip_discard(zip);
    return absl::InvalidArgumentError(
        absl::StrCat("--output=", path, ": cannot write: ", why));
  }
  // Whole on the disk before it replaces an earlier archive.
  if (absl::Status s = CommitFileAtomically(tmp, path); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("--output=", path, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace tessera
