#include "ps_server/row_disk_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps_server/row_memory_budget.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRecordBytes = 40;
// A database's memory: the least a budget gives its tier.
constexpr int64_t kMemory = 4 << 20;

std::string RecordOf(int64_t id) {
  std::string record(kRecordBytes, '\0');
  for (int64_t i = 0; i < kRecordBytes; ++i) {
    record[i] = static_cast<char>((id * 31 + i * 7) & 0xFF);
  }
  return record;
}

class RowDiskStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("tessera_row_disk_store_", getpid());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<RowDiskStore> Open(const std::string& name) {
    absl::StatusOr<std::unique_ptr<RowDiskStore>> store = RowDiskStore::Open(
        NewRowDiskDatabase((dir_ / name).string(), kMemory), kRecordBytes);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  fs::path dir_;
};

TEST_F(RowDiskStoreTest, PutTakeRoundTripsRecordsBitForBit) {
  std::unique_ptr<RowDiskStore> store = Open("t");
  ASSERT_NE(store, nullptr);
  std::vector<int64_t> ids = {-5, 0, 7, int64_t{1} << 40};
  std::vector<std::string> records;
  std::vector<const char*> pointers;
  for (int64_t id : ids) records.push_back(RecordOf(id));
  for (const std::string& r : records) pointers.push_back(r.data());
  ASSERT_TRUE(store->Put(ids, pointers).ok());
  EXPECT_EQ(store->rows(), 4);

  char out[kRecordBytes];
  absl::StatusOr<bool> got = store->Get(7, out);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(std::string(out, kRecordBytes), RecordOf(7));
  EXPECT_EQ(store->rows(), 4);

  got = store->Take(-5, out);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(std::string(out, kRecordBytes), RecordOf(-5));
  EXPECT_EQ(store->rows(), 3);
  got = store->Take(-5, out);  // taken: gone
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  got = store->Get(12345, out);  // never held
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);

  std::map<int64_t, std::string> seen;
  ASSERT_TRUE(store
                  ->ForEach([&](int64_t id, const char* record) {
                    seen[id] = std::string(record, kRecordBytes);
                  })
                  .ok());
  ASSERT_EQ(seen.size(), 3u);
  for (int64_t id : {int64_t{0}, int64_t{7}, int64_t{1} << 40}) {
    EXPECT_EQ(seen[id], RecordOf(id)) << id;
  }

  const std::string changed(kRecordBytes, 'x');
  const char* changed_ptr = changed.data();
  const int64_t seven = 7;
  ASSERT_TRUE(store->Overwrite({&seven, 1}, {&changed_ptr, 1}).ok());
  ASSERT_TRUE(store->Get(7, out).ok());
  EXPECT_EQ(std::string(out, kRecordBytes), changed);
  EXPECT_EQ(store->rows(), 3);
  ASSERT_TRUE(store->Delete({&seven, 1}).ok());
  EXPECT_EQ(store->rows(), 2);
  got = store->Get(7, out);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
}

TEST_F(RowDiskStoreTest, RowsOfAGroupAreKeptTogetherInIdOrder) {
  // Groups by the id's remainder: ids 0..11 in three groups, negative ids
  // (high bytes set) last within their group, as bytes order them.
  auto by_three = [](int64_t id) -> uint32_t {
    return static_cast<uint32_t>(((id % 3) + 3) % 3);
  };
  absl::StatusOr<std::unique_ptr<RowDiskStore>> opened = RowDiskStore::Open(
      NewRowDiskDatabase((dir_ / "grouped").string(), kMemory), kRecordBytes,
      by_three);
  ASSERT_TRUE(opened.ok()) << opened.status();
  RowDiskStore& store = **opened;
  std::vector<int64_t> ids = {11, -3, 4, 0, 9, 2, 7, 5, 1, 3, 10, 8, 6};
  std::vector<std::string> records;
  std::vector<const char*> pointers;
  for (int64_t id : ids) records.push_back(RecordOf(id));
  for (const std::string& r : records) pointers.push_back(r.data());
  ASSERT_TRUE(store.Put(ids, pointers).ok());

  std::vector<int64_t> order;
  ASSERT_TRUE(store
                  .ForEach([&](int64_t id, const char* record) {
                    order.push_back(id);
                    EXPECT_EQ(std::string(record, kRecordBytes), RecordOf(id));
                  })
                  .ok());
  EXPECT_EQ(order,
            (std::vector<int64_t>{0, 3, 6, 9, -3, 1, 4, 7, 10, 2, 5, 8, 11}));
  // Lookups, deletes and takes find a row through its group.
  char out[kRecordBytes];
  absl::StatusOr<bool> got = store.Take(-3, out);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(std::string(out, kRecordBytes), RecordOf(-3));
  const int64_t seven = 7;
  ASSERT_TRUE(store.Delete({&seven, 1}).ok());
  got = store.Get(7, out);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  got = store.Get(10, out);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(std::string(out, kRecordBytes), RecordOf(10));
  EXPECT_EQ(store.rows(), 11);
}

TEST_F(RowDiskStoreTest, OpenDiscardsWhatAKilledServerLeftAndCloseRemoves) {
  const fs::path folder = dir_ / "tier";
  fs::create_directories(folder);
  std::ofstream(folder / "leftover.sst") << "a killed server's file";
  {
    std::unique_ptr<RowDiskStore> store = Open("tier");
    ASSERT_NE(store, nullptr);
    EXPECT_FALSE(fs::exists(folder / "leftover.sst"));
    EXPECT_EQ(store->rows(), 0);
    int visited = 0;
    ASSERT_TRUE(store->ForEach([&](int64_t, const char*) { ++visited; }).ok());
    EXPECT_EQ(visited, 0);
  }
  EXPECT_FALSE(fs::exists(folder));
}

TEST_F(RowDiskStoreTest, OpenRefusesAFolderItCannotMake) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  absl::StatusOr<std::unique_ptr<RowDiskStore>> store = RowDiskStore::Open(
      NewRowDiskDatabase((dir_ / "file" / "tier").string(), kMemory),
      kRecordBytes);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find((dir_ / "file").string()),
            std::string::npos)
      << store.status();
}

TEST(ParseByteCountTest, TakesSuffixesAndRefusesTheRest) {
  EXPECT_EQ(*ParseByteCount("1048576"), 1048576);
  EXPECT_EQ(*ParseByteCount("512M"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteCount("2G"), int64_t{2} << 30);
  EXPECT_EQ(*ParseByteCount("64k"), int64_t{64} << 10);
  EXPECT_EQ(*ParseByteCount("1T"), int64_t{1} << 40);
  for (const char* bad :
       {"", "0", "-5", "1.5G", "G", "12Q", "9999999999T", "+3", "2 G"}) {
    absl::StatusOr<int64_t> parsed = ParseByteCount(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find(absl::StrCat("\"", bad, "\"")),
                std::string::npos)
          << parsed.status();
    }
  }
}

TEST(ParseByteCountTest, RowMemoryLimitRefusesLimitsBelowTheTiersMemory) {
  EXPECT_EQ(*ParseRowMemoryLimit("8M"), RowMemoryBudget::kMinLimitBytes);
  EXPECT_EQ(*ParseRowMemoryLimit("2G"), int64_t{2} << 30);
  for (const char* bad : {"1M", "8388607", "4096K"}) {
    absl::StatusOr<int64_t> parsed = ParseRowMemoryLimit(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(parsed.status().message());
    EXPECT_NE(message.find(bad), std::string::npos) << message;
    EXPECT_NE(message.find("8M"), std::string::npos) << message;
  }
  EXPECT_FALSE(ParseRowMemoryLimit("x").ok());
}

TEST_F(RowDiskStoreTest, TiersOfOneDatabaseKeepTheirRowsApart) {
  std::shared_ptr<RowDiskDatabase> database =
      NewRowDiskDatabase((dir_ / "rows").string(), 4 << 20);
  absl::StatusOr<std::unique_ptr<RowDiskStore>> a =
      RowDiskStore::Open(database, kRecordBytes);
  absl::StatusOr<std::unique_ptr<RowDiskStore>> b =
      RowDiskStore::Open(database, kRecordBytes);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  // The same ids in both, and ids at the ends of the id range.
  const std::vector<int64_t> ids = {std::numeric_limits<int64_t>::min(), -1, 0,
                                    7, std::numeric_limits<int64_t>::max()};
  std::vector<std::string> records;
  std::vector<const char*> pointers;
  for (int64_t id : ids) records.push_back(RecordOf(id));
  for (const std::string& r : records) pointers.push_back(r.data());
  ASSERT_TRUE((*a)->Put(ids, pointers).ok());
  const std::string other = RecordOf(1000);
  const int64_t seven = 7;
  const char* other_record = other.data();
  ASSERT_TRUE((*b)->Put(absl::MakeConstSpan(&seven, 1),
                        absl::MakeConstSpan(&other_record, 1))
                  .ok());
  std::map<int64_t, std::string> seen_a, seen_b;
  ASSERT_TRUE((*a)->ForEach([&](int64_t id, const char* r) {
                    seen_a[id] = std::string(r, kRecordBytes);
                  })
                  .ok());
  ASSERT_TRUE((*b)->ForEach([&](int64_t id, const char* r) {
                    seen_b[id] = std::string(r, kRecordBytes);
                  })
                  .ok());
  ASSERT_EQ(seen_a.size(), ids.size());
  for (int64_t id : ids) EXPECT_EQ(seen_a[id], RecordOf(id)) << id;
  ASSERT_EQ(seen_b.size(), 1u);
  EXPECT_EQ(seen_b[7], other);
  char out[kRecordBytes];
  absl::StatusOr<bool> got = (*b)->Take(7, out);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(std::string(out, kRecordBytes), other);
  got = (*a)->Get(7, out);
  ASSERT_TRUE(got.ok() && *got) << "b's Take removed a's row";
  EXPECT_EQ(std::string(out, kRecordBytes), RecordOf(7));
  // A closed tier's rows go; the database and the other tier stay.
  a->reset();
  absl::StatusOr<std::unique_ptr<RowDiskStore>> c =
      RowDiskStore::Open(database, kRecordBytes);
  ASSERT_TRUE(c.ok()) << c.status();
  int visited = 0;
  ASSERT_TRUE((*c)->ForEach([&](int64_t, const char*) { ++visited; }).ok());
  EXPECT_EQ(visited, 0);
  EXPECT_TRUE(fs::exists(dir_ / "rows"));
  b->reset();
  c->reset();
  database.reset();
  EXPECT_FALSE(fs::exists(dir_ / "rows"));
}

TEST(RowMemoryBudgetTest, ChargesWithinTheLimit) {
  constexpr int64_t kMiB = 1 << 20;
  RowMemoryBudget budget(64 * kMiB, "/tmp/tiers");
  // The tiers' shared memory comes first: 1/16 of the limit.
  EXPECT_EQ(budget.tier_memory_bytes(), 4 * kMiB);
  EXPECT_EQ(budget.used_bytes(), 4 * kMiB);
  EXPECT_TRUE(budget.TryCharge(40 * kMiB));
  EXPECT_FALSE(budget.TryCharge(21 * kMiB));
  EXPECT_EQ(budget.used_bytes(), 44 * kMiB);
  budget.Charge(30 * kMiB);  // forced past the limit
  EXPECT_EQ(budget.used_bytes(), 74 * kMiB);
  budget.Charge(-30 * kMiB);
  EXPECT_TRUE(budget.TryCharge(20 * kMiB));
  EXPECT_EQ(RowMemoryBudget(1 << 30, "/x").tier_memory_bytes(), 64 * kMiB);
  // At least 4 MiB: two memtables of 1 MiB and the cache.
  EXPECT_EQ(RowMemoryBudget(1 << 20, "/x").tier_memory_bytes(), 4 * kMiB);
}

TEST(RowMemoryBudgetTest, CountsTheProcessResidentMemory) {
  constexpr int64_t kMiB = 1 << 20;
  int64_t resident = 10 * kMiB;
  RowMemoryBudget budget(64 * kMiB, "/tmp/tiers", [&] { return resident; });
  // Charged: the tier's 4 MiB and the rows. Resident: the process, plus
  // the tier's 4 MiB still to come (its database is not open yet).
  EXPECT_TRUE(budget.TryCharge(40 * kMiB));  // 10 + 40 + 4 resident
  resident = 46 * kMiB;
  EXPECT_TRUE(budget.TryCharge(14 * kMiB));  // 46 + 14 + 4 = 64
  EXPECT_EQ(budget.used_bytes(), 58 * kMiB);
  resident = 60 * kMiB;
  // Charged bytes leave 6 MiB, but the process has no room left.
  EXPECT_FALSE(budget.TryCharge(kMiB));
  EXPECT_EQ(budget.used_bytes(), 58 * kMiB);
  EXPECT_GT(ProcessResidentBytes(), 0);
}

TEST(RowMemoryBudgetTest, MemoryFreedButStillResidentDoesNotBlockCharges) {
  constexpr int64_t kMiB = 1 << 20;
  const int64_t before = ProcessResidentBytes();
  ASSERT_GT(before, 0);
  // 256 MiB in pieces below glibc's mmap threshold, the last one kept so
  // the rest cannot be trimmed off the heap's top: freed, they stay
  // resident until returned to the system (as tables dropped by a
  // restore do).
  std::vector<char*> pieces;
  for (int i = 0; i < 4096; ++i) {
    pieces.push_back(new char[64 << 10]);
    std::memset(pieces.back(), 1, 64 << 10);
  }
  for (size_t i = 0; i + 1 < pieces.size(); ++i) delete[] pieces[i];
  const int64_t after_free = ProcessResidentBytes();
  if (after_free <= before + 128 * kMiB) {
    delete[] pieces.back();
    GTEST_SKIP() << "this allocator returned the freed memory itself";
  }
  RowMemoryBudget budget(before + 128 * kMiB, "/tmp/tiers",
                         ProcessResidentBytes);
  EXPECT_TRUE(budget.TryCharge(kMiB))
      << "resident " << before << " before, " << after_free
      << " after freeing, " << ProcessResidentBytes() << " now";
  EXPECT_LT(ProcessResidentBytes(), before + 64 * kMiB);
  delete[] pieces.back();
}

TEST(RowMemoryBudgetTest, ResidentBytesFollowTouchedMemoryAndTheForkedChild) {
  constexpr int64_t kMiB = 1 << 20;
  const int64_t before = ProcessResidentBytes();
  ASSERT_GT(before, 0);
  // Read once more through the file kept open: it must read afresh.
  std::unique_ptr<char[]> touched(new char[64 * kMiB]);
  std::memset(touched.get(), 1, 64 * kMiB);
  EXPECT_GE(ProcessResidentBytes(), before + 60 * kMiB);
  // A forked child touching memory of its own sees its own resident
  // memory grow, not the parent's reading (the file is per process).
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int64_t child_before = ProcessResidentBytes();
    char* more = new char[128 * kMiB];
    std::memset(more, 2, 128 * kMiB);
    const int64_t grown = ProcessResidentBytes() - child_before;
    const bool ok = grown >= 120 * kMiB;
    (void)!write(pipe_fds[1], &ok, 1);
    _exit(0);
  }
  close(pipe_fds[1]);
  bool child_ok = false;
  ASSERT_EQ(read(pipe_fds[0], &child_ok, 1), 1);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(child_ok) << "the child's reading did not grow by its 128 MiB";
  EXPECT_LT(ProcessResidentBytes(), before + 128 * kMiB);
}

}  // namespace
}  // namespace tessera
