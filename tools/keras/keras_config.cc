#include "tools/keras/keras_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "tools/keras/keras_graph.h"

namespace tessera {
namespace keras {
namespace {

bool SameInitializer(const Initializer& a, const Initializer& b) {
  return a.kind() == b.kind() && a.value() == b.value() &&
         a.minval() == b.minval() && a.maxval() == b.maxval() &&
         a.stddev() == b.stddev();
}

}  // namespace

absl::Status Refuse(const KerasNode& n, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer \"", n.name, "\" (", n.class_name, "): ", why));
}

bool IsNull(const json& c, const char* key) {
  return !c.contains(key) || c[key].is_null();
}

std::string DtypeName(const json& d) {
  if (d.is_string()) return d.get<std::string>();
  if (d.is_object() && d.contains("config") && d["config"].is_object()) {
    return d["config"].value("name", std::string("float32"));
  }
  return "float32";
}

std::string ObjectName(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) {
    if (j.contains("config") && j["config"].is_string()) {
      return j["config"].get<std::string>();
    }
    return j.value("class_name", std::string());
  }
  return "";
}

std::vector<int64_t> Ints(const json& j) {
  std::vector<int64_t> out;
  if (j.is_number_integer()) out.push_back(j.get<int64_t>());
  if (j.is_array()) {
    for (const json& v : j) {
      if (v.is_number_integer()) out.push_back(v.get<int64_t>());
    }
  }
  return out;
}

absl::StatusOr<Activation> ParseActivation(const KerasNode& n, const json& a) {
  const std::string name = a.is_null() ? "linear" : ObjectName(a);
  if (name == "linear" || name.empty()) return LINEAR;
  if (name == "relu") return RELU;
  if (name == "sigmoid") return SIGMOID;
  if (name == "tanh") return TANH;
  if (name == "softmax") return SOFTMAX;
  return Refuse(n, absl::StrCat("activation \"", name,
                                "\": Tessera has linear, relu, sigmoid, tanh "
                                "and softmax"));
}

absl::StatusOr<std::optional<Initializer>> ParseInitializer(
    const KerasNode& n, const char* field, const Initializer& fallback) {
  if (IsNull(n.config, field)) return std::optional<Initializer>();
  const json& j = n.config[field];
  const std::string name = KerasSnakeCase(ObjectName(j));
  const json c =
      j.is_object() && j.contains("config") && j["config"].is_object()
          ? j["config"]
          : json::object();
  Initializer init;
  if (name == "glorot_uniform") {
    init.set_kind(Initializer::GLOROT_UNIFORM);
  } else if (name == "zeros") {
    init.set_kind(Initializer::ZEROS);
  } else if (name == "ones") {
    init.set_kind(Initializer::ONES);
  } else if (name == "constant") {
    init.set_kind(Initializer::CONSTANT);
    init.set_value(c.value("value", 0.0f));
  } else if (name == "random_uniform") {
    init.set_kind(Initializer::UNIFORM);
    init.set_minval(c.value("minval", -0.05f));
    init.set_maxval(c.value("maxval", 0.05f));
  } else if (name == "random_normal" && c.value("mean", 0.0) == 0.0) {
    init.set_kind(Initializer::NORMAL);
    init.set_stddev(c.value("stddev", 0.05f));
  } else {
    return Refuse(n, absl::StrCat(field, " \"", ObjectName(j),
                                  "\": Tessera has glorot_uniform, zeros, "
                                  "ones, constant, random_uniform and "
                                  "random_normal (mean 0)"));
  }
  if (SameInitializer(init, fallback)) return std::optional<Initializer>();
  return std::optional<Initializer>(init);
}

Initializer Kind(Initializer::Kind kind) {
  Initializer init;
  init.set_kind(kind);
  return init;
}

absl::Status RequireNull(const KerasNode& n,
                         std::initializer_list<const char*> fields) {
  for (const char* f : fields) {
    if (!IsNull(n.config, f) &&
        !(n.config[f].is_number() && n.config[f].get<double>() == 0)) {
      return Refuse(n, absl::StrCat(f, " is set: Tessera's ", n.class_name,
                                    " has no ", f));
    }
  }
  return absl::OkStatus();
}

absl::Status RequireChannelsLast(const KerasNode& n) {
  const std::string format = n.config.value("data_format", std::string());
  if (!format.empty() && format != "channels_last") {
    return Refuse(n, absl::StrCat("data_format ", format,
                                  ": Tessera's images are channels_last "
                                  "(NHWC)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Padding> ParsePadding(const KerasNode& n) {
  const std::string p = n.config.value("padding", std::string("valid"));
  if (p == "valid") return VALID;
  if (p == "same") return SAME;
  return Refuse(n, absl::StrCat("padding \"", p,
                                "\": Tessera has valid and "
                                "same"));
}

bool IsLastAxis(const json& axis, size_t rank) {
  std::vector<int64_t> a = Ints(axis);
  if (a.size() != 1) return false;
  return a[0] == -1 || a[0] == static_cast<int64_t>(rank) - 1;
}

float Float(const json& c, const char* key, float fallback) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_number()) return std::nanf("");
  return c[key].get<float>();
}

}  // namespace keras
}  // namespace tessera
