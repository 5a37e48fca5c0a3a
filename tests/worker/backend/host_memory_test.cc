#include "worker/backend/host_memory.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

// Host memory that records every allocation's size and what is still held.
class RecordingAllocator final : public HostAllocator {
 public:
  void* AllocateHost(int64_t bytes) override {
    ++live;
    sizes.push_back(bytes);
    return AllocatePlainHost(bytes);
  }
  void FreeHost(void* ptr) override {
    --live;
    FreePlainHost(ptr);
  }
  int live = 0;
  std::vector<int64_t> sizes;
};

// The rows a step pulls change in number every step; pinned memory is slow
// to allocate, so the buffer allocates only when it must grow, and then at
// least twice over.
TEST(HostBufferTest, GrowsGeometricallyAndReusesWhatFits) {
  RecordingAllocator host;
  {
    HostBuffer<float> buffer(&host);
    EXPECT_EQ(buffer.size(), 0);
    buffer.Resize(100);
    EXPECT_EQ(buffer.span().size(), 100u);
    ASSERT_EQ(host.sizes.size(), 1u);
    EXPECT_EQ(host.sizes.back(), 100 * 4);
    buffer.span()[99] = 1.5f;
    buffer.Resize(60);  // fits: no allocation
    buffer.Resize(100);
    EXPECT_EQ(host.sizes.size(), 1u);
    EXPECT_EQ(buffer.span()[99], 1.5f);  // same memory
    buffer.Resize(101);                  // grows to twice the capacity
    ASSERT_EQ(host.sizes.size(), 2u);
    EXPECT_EQ(host.sizes.back(), 200 * 4);
    EXPECT_EQ(buffer.capacity(), 200);
    buffer.Resize(1000);  // more than twice: exactly what is asked
    EXPECT_EQ(host.sizes.back(), 1000 * 4);
    EXPECT_EQ(host.live, 1);  // the old arrays went back
    buffer.Resize(0);
    EXPECT_TRUE(buffer.span().empty());
    EXPECT_EQ(host.live, 1);
  }
  EXPECT_EQ(host.live, 0);
}

TEST(HostBufferTest, WithoutAnAllocatorUsesPlainMemory) {
  HostBuffer<int64_t> buffer;
  buffer.Resize(3);
  for (int64_t i = 0; i < 3; ++i) buffer.span()[i] = i;
  EXPECT_EQ(buffer.data()[2], 2);
}

}  // namespace
}  // namespace tessera
