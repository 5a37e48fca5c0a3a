#include "common/serial_executor.h"

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(SerialExecutorTest, RunsTasksInOrderAndDrainsOnDestruction) {
  std::vector<int> order;
  std::atomic<int> concurrent{0}, max_concurrent{0};
  {
    SerialExecutor executor;
    for (int i = 0; i < 100; ++i) {
      executor.Post([&, i] {
        const int now = ++concurrent;
        if (now > max_concurrent) max_concurrent = now;
        order.push_back(i);
        --concurrent;
      });
    }
  }
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(max_concurrent.load(), 1);
}

TEST(SerialExecutorTest, AsyncReturnsResultsFromOneKeptThread) {
  SerialExecutor executor;
  std::vector<std::future<std::thread::id>> ids;
  for (int i = 0; i < 10; ++i) {
    ids.push_back(executor.Async([] { return std::this_thread::get_id(); }));
  }
  const std::thread::id first = ids[0].get();
  EXPECT_NE(first, std::this_thread::get_id());
  for (int i = 1; i < 10; ++i) EXPECT_EQ(ids[i].get(), first) << "call " << i;
  std::future<int> value = executor.Async([] { return 42; });
  EXPECT_EQ(value.get(), 42);
}

}  // namespace
}  // namespace tessera
