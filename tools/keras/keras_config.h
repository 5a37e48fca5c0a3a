// Reading one Keras layer's config (KerasNode::config): the field parsers
// the layer translators (keras_layers.h) and the importer share. Each
// refuses what Tessera cannot do as Keras would, with InvalidArgument
// naming the layer, its class and why (Refuse).
#ifndef TESSERA_TOOLS_KERAS_KERAS_CONFIG_H_
#define TESSERA_TOOLS_KERAS_KERAS_CONFIG_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "proto/job.pb.h"
#include "proto/model.pb.h"
#include "tools/keras/keras_graph.h"

namespace tessera {
namespace keras {

using json = nlohmann::json;

// InvalidArgument: layer "<name>" (<class>): <why>.
absl::Status Refuse(const KerasNode& n, absl::string_view why);

// True when `key` is missing from `c` or null.
bool IsNull(const json& c, const char* key);

// A Keras dtype: "float32", or a DTypePolicy object.
std::string DtypeName(const json& d);

// The name of a serialized Keras object: a string, or {"class_name": ...}
// (a function such as an activation keeps its name in "config").
std::string ObjectName(const json& j);

// One int or a list of ints.
std::vector<int64_t> Ints(const json& j);

// A number field, `fallback` when unset, NaN when not a number (so the
// range checks downstream refuse it).
float Float(const json& c, const char* key, float fallback);

// linear (also null), relu, sigmoid, tanh or softmax.
absl::StatusOr<Activation> ParseActivation(const KerasNode& n, const json& a);

// `field`'s initializer, or nullopt when it is `fallback` (Tessera's
// default for that slot, which the description then leaves unset).
absl::StatusOr<std::optional<Initializer>> ParseInitializer(
    const KerasNode& n, const char* field, const Initializer& fallback);

Initializer Kind(Initializer::Kind kind);

// Refuses any of `fields` that is set (a number 0 counts as unset).
absl::Status RequireNull(const KerasNode& n,
                         std::initializer_list<const char*> fields);

// Refuses a data_format other than channels_last.
absl::Status RequireChannelsLast(const KerasNode& n);

// "valid" (the default) or "same".
absl::StatusOr<Padding> ParsePadding(const KerasNode& n);

// Keras' last-axis options: -1 or [-1] (or the last axis by number, which
// needs the rank: `rank` counts the batch axis).
bool IsLastAxis(const json& axis, size_t rank);

}  // namespace keras
}  // namespace tessera

#endif  // TESSERA_TOOLS_KERAS_KERAS_CONFIG_H_
