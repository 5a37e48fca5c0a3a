#ifndef TESSERA_TESTS_WRITTEN_TEXT_H_
#define TESSERA_TESTS_WRITTEN_TEXT_H_

#include <cstdio>
#include <string>

namespace tessera {

// Everything written so far to `file` (a std::tmpfile() handed to code
// that prints its progress or its recovery lines), read from the start.
inline std::string WrittenText(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), file) != nullptr) text += buffer;
  return text;
}

}  // namespace tessera

#endif  // TESSERA_TESTS_WRITTEN_TEXT_H_
