// Reader for click-through data in the Criteo format (Criteo Display
// Advertising Challenge / Criteo 1TB): one example per line,
//
//   label \t I1 .. I<num_dense> \t C1 .. C<num_fields>
//
// tab-separated, plain or gzip-compressed. The label is 0 or 1; I<j> are
// integers (counts); C<f> are hexadecimal hashes of categorical values. Any
// field but the label may be empty (missing).
//
// Features, as Criteo models usually prepare them:
//  - An integer x becomes log(1 + x) (CriteoDenseValue); negative values
//    (Criteo's I2 has a few) are clamped to 0 first, and a missing one is 0.
//  - A categorical field of up to 16 hex digits (either case) is one 64-bit
//    id, its bits kept in an int64; a missing one is an empty bag.
//  - Extension for multi-hot fields: a categorical field may hold several
//    ids separated by ',' ("a3f,7c0,a3f"), kept in order with repeats; the
//    real Criteo files never do this. An empty id between commas is an error.
//
// Contract:
//  - Errors are InvalidArgument and name the file, the line number, the
//    column (1-based, and its name: label, I3, C7) and the bad text: a wrong
//    number of columns, a label other than 0 or 1, an integer that is not
//    one or does not fit 64 bits, a bad or too long hex id. A gzip stream cut
//    short or corrupt is DataLoss; see GzLineReader for I/O errors. More
//    than 2^32 ids in one field of the slice is ResourceExhausted (the
//    data set's 32-bit offsets).
//  - A format with a negative count or more than 2^20 columns of either
//    kind is InvalidArgument, checked before the file is read; memory is
//    reserved up front for at most 256 MiB of examples, however large
//    `count` is, the rest as lines arrive.
//  - A slice [first, first + count) skips the leading lines without parsing
//    them and stops reading after the slice, so lines outside it are not
//    checked; a slice past the end is OutOfRange naming the example count.
//  - With CriteoFormat::label_optional, a file may have no label column
//    (the examples to predict): the first line read decides, and a line
//    that then has another count is the error above.
//  - '\r' before the '\n' is ignored; a blank line is a line with one column
//    (an error).

#ifndef TESSERA_DATA_CRITEO_CRITEO_READER_H_
#define TESSERA_DATA_CRITEO_CRITEO_READER_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "data/criteo/ctr_dataset.h"

namespace tessera {

struct CriteoFormat {
  int num_dense = 13;   // integer columns I1..
  int num_fields = 26;  // categorical columns C1..
  // New examples to predict may leave the label column out: the first line
  // read decides (one column fewer: no labels, CtrDataset::has_labels
  // false), and every line must then have as many columns as it. Training
  // needs the label.
  bool label_optional = false;
};

// The feature an integer column's value x becomes: log(1 + max(x, 0)).
// The generator computes its hidden model on exactly these values.
inline float CriteoDenseValue(int64_t x) {
  return x <= 0 ? 0.0f : static_cast<float>(std::log1p(static_cast<double>(x)));
}

// Loads examples [first, first + count) of the file at `path`; count == -1
// loads to the end.
absl::StatusOr<CtrDataset> LoadCriteo(const std::string& path,
                                      int64_t first = 0, int64_t count = -1,
                                      const CriteoFormat& format = {});

// The number of examples (lines) in the file, read through without parsing,
// so a worker can check its shard against the whole training set.
absl::StatusOr<int64_t> CountCriteoExamples(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_DATA_CRITEO_CRITEO_READER_H_
