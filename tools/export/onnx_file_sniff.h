// Tells an ONNX model file (tessera_export's output, or any exporter's)
// from other files by its first protobuf fields, without the ONNX classes:
// so that a tool handed one where it wants a checkpoint can say so.

#ifndef TESSERA_TOOLS_EXPORT_ONNX_FILE_SNIFF_H_
#define TESSERA_TOOLS_EXPORT_ONNX_FILE_SNIFF_H_

#include <string>

namespace tessera {

// True when `path` starts as an ONNX ModelProto: ir_version (field 1, a
// small varint) first, and among the top-level fields that follow, in
// protobuf's wire format and within the file, a graph (field 7, length-
// delimited). Reads only the fields' headers. False for anything else,
// including a file that cannot be read.
bool LooksLikeOnnxModel(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_TOOLS_EXPORT_ONNX_FILE_SNIFF_H_
