// Opening a file through zlib (gzopen), which reads and writes plain and
// gzip files alike: the one place that maps its failure to a status.
#ifndef TESSERA_DATA_IO_GZ_FILE_H_
#define TESSERA_DATA_IO_GZ_FILE_H_

#include <zlib.h>

#include <string>

#include "absl/status/statusor.h"

namespace tessera {

// gzopen(path, mode) with a 1 MiB buffer. A failure of open() keeps its
// errno's code ("<path>: cannot open", or "cannot create" for a mode that
// writes); one of zlib itself (out of memory) is Internal. The caller
// gzclose()s the file.
absl::StatusOr<gzFile> OpenGzFile(const std::string& path, const char* mode);

}  // namespace tessera

#endif  // TESSERA_DATA_IO_GZ_FILE_H_
