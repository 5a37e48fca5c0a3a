#include "ps_server/spilled_id_filter.h"

#include <utility>

#include "common/counter_rng.h"

namespace tessera {
namespace {

constexpr int64_t kBitsPerId = 10;
constexpr int kProbes = 6;  // near ln 2 x 10 bits, fewer for one block
constexpr uint64_t kWordsPerBlock = 8;

// Distinct from the table's own hashes, which pick the stripe (so every id
// of a stripe shares their top bits) and the index slot.
inline uint64_t BlockHash(int64_t id) {
  return CounterHash(0xB10F17E55B111Dull, static_cast<uint64_t>(id));
}
inline uint64_t ProbeHash(int64_t id) {
  return CounterHash(0x5B111DB10F17E5ull, static_cast<uint64_t>(id));
}

// The block of `blocks` that `hash` picks (multiply-shift, no division).
inline uint64_t BlockOf(uint64_t hash, uint64_t blocks) {
  return static_cast<uint64_t>(
      (static_cast<unsigned __int128>(hash) * blocks) >> 64);
}

}  // namespace

void SpilledIdFilter::Add(int64_t id) {
  // A row spilled again after it came back (or an id the filter already
  // answers for) needs no new bits: without this check the filter grew
  // with the number of spills, not of ids, and took the budget's memory.
  if (MayContain(id)) return;
  if (levels_.empty() || levels_.back().size >= levels_.back().capacity) {
    Level level;
    level.capacity =
        levels_.empty() ? kFirstCapacity : levels_.back().capacity * 2;
    level.blocks =
        static_cast<uint64_t>((level.capacity * kBitsPerId + 511) / 512);
    level.words.assign(level.blocks * kWordsPerBlock, 0);
    bytes_ += static_cast<int64_t>(level.words.size() * sizeof(uint64_t));
    levels_.push_back(std::move(level));
  }
  Level& level = levels_.back();
  uint64_t* block = level.words.data() +
                    BlockOf(BlockHash(id), level.blocks) * kWordsPerBlock;
  uint64_t probes = ProbeHash(id);
  for (int k = 0; k < kProbes; ++k, probes >>= 9) {
    block[(probes >> 6) & 7] |= uint64_t{1} << (probes & 63);
  }
  ++level.size;
}

bool SpilledIdFilter::MayContain(int64_t id) const {
  if (levels_.empty()) return false;
  const uint64_t block_hash = BlockHash(id);
  const uint64_t probe_hash = ProbeHash(id);
  for (const Level& level : levels_) {
    const uint64_t* block =
        level.words.data() + BlockOf(block_hash, level.blocks) * kWordsPerBlock;
    uint64_t probes = probe_hash;
    bool all = true;
    for (int k = 0; k < kProbes && all; ++k, probes >>= 9) {
      all = (block[(probes >> 6) & 7] >> (probes & 63)) & 1;
    }
    if (all) return true;
  }
  return false;
}

void SpilledIdFilter::Swap(SpilledIdFilter& other) {
  levels_.swap(other.levels_);
  std::swap(bytes_, other.bytes_);
}

}  // namespace tessera
