// The fuzzed readers take a path; MemFile hands them the fuzzer's bytes as a
// file that lives in memory (memfd), so no disk I/O slows the fuzzer down.
#ifndef TESSERA_TESTS_FUZZ_MEMFD_PATH_H_
#define TESSERA_TESTS_FUZZ_MEMFD_PATH_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tessera {
namespace fuzz {

class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("fuzz_input", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();  // the harness, not the code under test
    size_t done = 0;
    while (done < size) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace fuzz
}  // namespace tessera

#endif  // TESSERA_TESTS_FUZZ_MEMFD_PATH_H_
