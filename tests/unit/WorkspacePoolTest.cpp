// An MLIR kernel's workspace pool (runtime/bundle/WorkspacePool.h): a call reuses the block a
// finished call gave back when it is large enough, calls at once never share one, and the
// larger block is the one kept.
#include "bundle/WorkspacePool.h"

#include <cstdint>
#include <gtest/gtest.h>

namespace attnc::mlirkernel {
namespace {

TEST(WorkspacePool, ReusesTheKeptBlockWhenLargeEnough) {
  WorkspacePool pool;
  void* first = nullptr;
  {
    const WorkspacePool::Lease lease = pool.take(1000);
    first = lease.data();
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % WorkspacePool::kAlignment, 0u);
  }
  {
    const WorkspacePool::Lease smaller = pool.take(640);
    EXPECT_EQ(smaller.data(), first);
  }
  void* larger = nullptr;
  {
    const WorkspacePool::Lease lease = pool.take(5000); // past the kept block: a new one
    larger = lease.data();
    ASSERT_NE(larger, nullptr);
  }
  const WorkspacePool::Lease kept = pool.take(5000); // the larger one was kept
  EXPECT_EQ(kept.data(), larger);
  EXPECT_EQ(pool.take(0).data(), nullptr); // no workspace, no block
}

TEST(WorkspacePool, CallsAtOnceTakeTheirOwnBlocks) {
  WorkspacePool pool;
  { const WorkspacePool::Lease warm = pool.take(256); }
  void* one = nullptr;
  void* other = nullptr;
  {
    const WorkspacePool::Lease first = pool.take(256), second = pool.take(256);
    one = first.data();
    other = second.data();
    ASSERT_NE(one, nullptr);
    ASSERT_NE(other, nullptr);
    EXPECT_NE(one, other);
  }
  const WorkspacePool::Lease after = pool.take(256);
  EXPECT_TRUE(after.data() == one || after.data() == other);
}

} // namespace
} // namespace attnc::mlirkernel
