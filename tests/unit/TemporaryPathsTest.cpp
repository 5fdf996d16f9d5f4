// What an interrupt removes (removeTemporaryPaths, called by attnc's interrupt thread): a
// staged output file and a compile's staging directory, and never a finished output.
#include "Support/TemporaryPaths.h"

#include "Link/BundleWriter.h"
#include "OutputFile.h"
#include "TestSupport.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

namespace attnc {
namespace {

namespace fs = std::filesystem;

class TemporaryPaths : public ::testing::Test {
protected:
  size_t entries(const fs::path& dir) const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir), {}));
  }

  test::ScratchDir scratch_{"temporary"};
  const fs::path& dir_ = scratch_.path();
};

TEST_F(TemporaryPaths, AnInterruptRemovesAStagedOutput) {
  tools::StagedFile staged(dir_ / "o.npy", "contents");
  EXPECT_EQ(entries(dir_), 1u); // .o.npy.XXXXXX
  removeTemporaryPaths();
  EXPECT_EQ(entries(dir_), 0u);
}

TEST_F(TemporaryPaths, AnInterruptAfterCommitKeepsTheOutput) {
  const fs::path out = dir_ / "new-output";
  {
    OutputStaging staging(out);
    std::ofstream(staging.scratch() / "bundle.so") << "elf";
    staging.commit({"bundle.so"});
    removeTemporaryPaths(); // once: the whole new output directory went
    EXPECT_TRUE(fs::exists(out / "bundle.so"));
  }
  EXPECT_TRUE(fs::exists(out / "bundle.so"));
  EXPECT_EQ(entries(out), 1u); // the staging directory is gone
}

TEST_F(TemporaryPaths, AnInterruptBeforeCommitRemovesTheStaging) {
  const fs::path out = dir_ / "new-output";
  OutputStaging staging(out);
  EXPECT_TRUE(fs::exists(staging.scratch()));
  removeTemporaryPaths();
  EXPECT_FALSE(fs::exists(out));
}

} // namespace
} // namespace attnc
