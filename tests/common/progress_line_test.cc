#include "common/progress_line.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/written_text.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Issue #42, defect 14: tessera_local_train and tessera_predict wrote their
// "\r" redraws into log files. Into a file each shown update is a plain
// line, the first at once, the rest at most one per interval, and the last
// text comes with Finish.
TEST(ProgressLineTest, IntoAFileWritesPlainLines) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine progress(file, absl::Hours(1));
    EXPECT_FALSE(progress.terminal());
    progress.Update("epoch 1   10.0%");
    progress.Update("epoch 1   50.0%");  // within the hour: kept
    progress.Update("epoch 1  100.0%");
    progress.Finish();
    progress.Update("epoch 2   10.0%");  // a new progress shows at once
    progress.Finish();
    progress.Finish();  // nothing more to end
  }
  EXPECT_EQ(WrittenText(file),
            "epoch 1   10.0%\nepoch 1  100.0%\nepoch 2   10.0%\n");
  std::fclose(file);
}

TEST(ProgressLineTest, IntoAPipeWritesPlainLines) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::FILE* writer = fdopen(fds[1], "w");
  ASSERT_NE(writer, nullptr);
  {
    ProgressLine progress(writer, absl::ZeroDuration());
    EXPECT_FALSE(progress.terminal());
    progress.Update("predict 50.0%");
    progress.Update("predict 100.0%");
    progress.Finish();
  }
  std::fclose(writer);
  std::string text;
  char buffer[256];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) text.append(buffer, n);
  close(fds[0]);
  EXPECT_EQ(text, "predict 50.0%\npredict 100.0%\n");
}

// A terminal keeps the bar redrawn in place.
TEST(ProgressLineTest, OnATerminalRedrawsOneLine) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  std::FILE* terminal = std::fopen(ptsname(master), "w");
  ASSERT_NE(terminal, nullptr);
  {
    ProgressLine progress(terminal);
    EXPECT_TRUE(progress.terminal());
    progress.Update("epoch 1 10%");
    progress.Update("epoch 1 20%");
    progress.Finish();
  }
  std::fclose(terminal);
  std::string text;
  char buffer[256];
  ssize_t n;
  // The slave is closed: the master reads what is left, then fails (EIO).
  while ((n = read(master, buffer, sizeof(buffer))) > 0) {
    text.append(buffer, n);
  }
  close(master);
  EXPECT_THAT(text, HasSubstr("\repoch 1 10%"));
  EXPECT_THAT(text, HasSubstr("\repoch 1 20%"));
  EXPECT_THAT(text, Not(HasSubstr("10%\n")));
}

}  // namespace
}  // namespace tessera
