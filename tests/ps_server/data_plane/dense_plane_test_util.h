// Helpers shared by the dense data plane's tests (plain and TLS).
#ifndef TESSERA_TESTS_PS_SERVER_DATA_PLANE_DENSE_PLANE_TEST_UTIL_H_
#define TESSERA_TESTS_PS_SERVER_DATA_PLANE_DENSE_PLANE_TEST_UTIL_H_

#include <sys/uio.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/socket.h"

namespace tessera {
namespace dense_plane_test {

// Writes a PushDense frame for `shard` that declares `declared_bytes` of
// gradient but carries only the first `sent_bytes` of them (ones): what a
// worker that dies mid-push leaves on the wire.
inline absl::Status WriteCutOffPush(Socket& socket, const std::string& shard,
                                    int64_t declared_bytes,
                                    int64_t sent_bytes) {
  std::string table;
  AppendString16(shard, &table);
  AppendInt64(0, &table);
  AppendInt64(declared_bytes, &table);
  FrameHeader header;
  header.op = FrameOp::kPushDense;
  header.count = 1;
  header.bytes = static_cast<int64_t>(table.size());
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(header, head);
  std::vector<float> part((sent_bytes + 3) / 4, 1.0f);
  const iovec parts[3] = {{head, sizeof(head)},
                          {table.data(), table.size()},
                          {part.data(), static_cast<size_t>(sent_bytes)}};
  return socket.WriteAll(parts);
}

}  // namespace dense_plane_test
}  // namespace tessera

#endif  // TESSERA_TESTS_PS_SERVER_DATA_PLANE_DENSE_PLANE_TEST_UTIL_H_
