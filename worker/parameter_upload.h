#ifndef TESSERA_WORKER_PARAMETER_UPLOAD_H_
#define TESSERA_WORKER_PARAMETER_UPLOAD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "worker/backend.h"

namespace tessera {

// Copies values[i] into params[i], the device arrays of `variables`, once
// every value was checked: InvalidArgument when the counts differ ("model
// has 4 <kind>variables, got 3") or a value has the wrong number of
// elements (naming the variable); nothing is copied then.
inline absl::Status UploadParameters(
    Backend* backend, absl::Span<const VariableDef> variables,
    absl::string_view kind, absl::Span<const absl::Span<const float>> values,
    std::vector<DeviceArray<float>>& params) {
  if (values.size() != variables.size() || params.size() < values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", variables.size(), " ", kind,
                     "variables, got ", values.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (static_cast<int64_t>(values[i].size()) != params[i].size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("wrong shape: variable ", variables[i].name, " has ",
                       params[i].size(), " elements, got ", values[i].size()));
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    backend->CopyToDevice(values[i].data(), params[i].data(),
                          values[i].size() * sizeof(float));
  }
  return absl::OkStatus();
}

// Checks that `grads` are buffers for the gradients of `variables`, one
// per variable with the size of `device_grads[i]`: InvalidArgument ("model
// has 4 <kind>variables, got 3 gradient buffers", or naming the variable)
// otherwise.
inline absl::Status CheckGradientBuffers(
    absl::Span<const VariableDef> variables, absl::string_view kind,
    absl::Span<const absl::Span<float>> grads,
    const std::vector<DeviceArray<float>>& device_grads) {
  if (grads.size() != variables.size() || device_grads.size() < grads.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", variables.size(), " ", kind,
                     "variables, got ", grads.size(), " gradient buffers"));
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (static_cast<int64_t>(grads[i].size()) != device_grads[i].size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wrong shape: gradient buffer of ", variables[i].name, " has ",
          grads[i].size(), " elements, need ", device_grads[i].size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMETER_UPLOAD_H_
