#include "ps_server/rocksdb_library.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(RocksDbLibraryTest, MissingLibraryNamesThePackageAndWhy) {
  absl::StatusOr<std::unique_ptr<RocksDbApi>> api =
      LoadRocksDbFrom({"libtessera_no_such_rocksdb.so.0"});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(api.status().message());
  EXPECT_NE(message.find("--row_memory_budget"), std::string::npos) << message;
  EXPECT_NE(message.find("install librocksdb7.8"), std::string::npos)
      << message;
  // dlerror's reason names the file that was not found.
  EXPECT_NE(message.find("libtessera_no_such_rocksdb.so.0"), std::string::npos)
      << message;
}

TEST(RocksDbLibraryTest, LoadsTheNodesLibraryAndAllItsFunctions) {
  absl::StatusOr<const RocksDbApi*> api = LoadRocksDb();
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_NE((*api)->open, nullptr);
  EXPECT_NE((*api)->writeoptions_disable_wal, nullptr);
  EXPECT_FALSE((*api)->soname.empty());
  // A second call returns the same table.
  absl::StatusOr<const RocksDbApi*> again = LoadRocksDb();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *api);
}

}  // namespace
}  // namespace tessera
