// Folders a tool writes its output into, created when missing as `mkdir
// -p` would, so that a path the user names for new files works whether or
// not its folder exists yet.

#ifndef TESSERA_COMMON_OUTPUT_FOLDER_H_
#define TESSERA_COMMON_OUTPUT_FOLDER_H_

#include <string>

#include "absl/status/status.h"

namespace tessera {

// Creates `folder` and its missing parents. The error names the folder and
// why (its code from errno: PermissionDenied, FailedPrecondition for a
// file in the way, ...). An empty `folder` is InvalidArgument.
absl::Status CreateOutputFolder(const std::string& folder);

// Creates the folder of an output prefix or file path ("/data/fm/train"
// for files /data/fm/train-00000-of-00008.tfrecord: /data/fm); a prefix
// with no folder part is in the working directory, which exists.
absl::Status CreateParentFolder(const std::string& prefix);

}  // namespace tessera

#endif  // TESSERA_COMMON_OUTPUT_FOLDER_H_
