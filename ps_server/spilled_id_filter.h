// Which ids a stripe of a growing table may have on its disk tier
// (ps_server/hash_table.h), so that a lookup of an id the tier never held
// (every new row of a growing table) skips the database.
#ifndef TESSERA_PS_SERVER_SPILLED_ID_FILTER_H_
#define TESSERA_PS_SERVER_SPILLED_ID_FILTER_H_

#include <cstdint>
#include <vector>

namespace tessera {

// A Bloom filter of the ids ever added, that grows with them: ids go to
// the newest of a series of blocked Bloom filters, each twice the size of
// the one before once that one holds its share (a scalable Bloom filter),
// so the table needs no size up front and nothing is ever rebuilt.
//
// Contract: MayContain(id) is true for every id added (no false
// negatives); for an id never added it is false but for about 1% of ids
// per filter of the series (10 bits and 6 probes of one 64-byte block per
// id), so about 1% times the number of filters in all, which grows with
// the log of the ids held. Adding an id the filter already answers for
// changes nothing, so a row spilled again and again costs its bits once:
// the filter grows with the distinct ids a stripe spilled, not with its
// spills. Ids are never removed: a row that came back from disk keeps its
// bits, which costs only a lookup that finds nothing.
//
// Not thread-safe: a stripe's lock guards its filter.
class SpilledIdFilter {
 public:
  // Ids the first filter holds; each later one holds twice the last.
  static constexpr int64_t kFirstCapacity = 1024;

  void Add(int64_t id);
  bool MayContain(int64_t id) const;
  // Bytes held by the filters (what the table charges its budget).
  int64_t bytes() const { return bytes_; }
  void Swap(SpilledIdFilter& other);

 private:
  struct Level {
    std::vector<uint64_t> words;  // blocks of 8 words (512 bits)
    uint64_t blocks = 0;
    int64_t capacity = 0;
    int64_t size = 0;
  };
  std::vector<Level> levels_;
  int64_t bytes_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_SPILLED_ID_FILTER_H_
