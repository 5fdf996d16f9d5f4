// Support/Files.h: a full disk is told apart from a path that cannot be written, in attnc's own
// writes and in what a tool says, and a MemoryFile keeps what is written to it by its name.
#include "Support/Files.h"

#include "TestSupport.h"

#include <filesystem>
#include <gtest/gtest.h>

namespace attnc {
namespace {

TEST(Files, AFullDiskIsTheMachinesFailure) {
  // /dev/full refuses every write with ENOSPC, as a full disk does.
  if (!std::filesystem::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/full here";
  try {
    writeFile("/dev/full", "contents");
    FAIL() << "writing /dev/full succeeded";
  } catch (const EnvironmentError& e) {
    EXPECT_STREQ(e.what(), "cannot write /dev/full: No space left on device");
  }
  EXPECT_THROW(writeFile("/nonexistent/file", "contents"), JobError);
}

TEST(Files, WhatAToolSaysOfAFullDisk) {
  EXPECT_TRUE(mentionsEnvironmentFailure("/usr/bin/ld: final link failed: No space left on "
                                         "device\ncollect2: error: ld returned 1 exit status\n"));
  EXPECT_TRUE(mentionsEnvironmentFailure("objcopy: kernel.o: Disk quota exceeded"));
  EXPECT_FALSE(mentionsEnvironmentFailure("ld: undefined reference to `attnc_kernel_run'"));
}

TEST(Files, AMemoryFileIsWrittenByItsName) {
  const MemoryFile file("test");
  writeFile(file.path(), "written through its name");
  EXPECT_EQ(file.contents(), "written through its name");
  const test::ScratchDir scratch("files");
  copyFile(file.path(), scratch.path() / "copy");
  const MemoryFile copy("copy");
  copyFile(scratch.path() / "copy", copy.path());
  EXPECT_EQ(copy.contents(), "written through its name");
}

} // namespace
} // namespace attnc
