// An MLIR kernel's workspace pool (runtime/bundle/WorkspacePool.h): a call reuses the block of
// the last call that finished when it is large enough, calls at once never share one, and the
// larger block is the one kept.
#include "bundle/WorkspacePool.h"

#include <cstdint>
#include <gtest/gtest.h>

namespace attnc::mlirkernel {
namespace {

TEST(WorkspacePool, ReusesTheKeptBlockWhenLargeEnough) {
  WorkspacePool pool;
  WorkspacePool::Block first = pool.take(1000);
  ASSERT_NE(first.data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first.data) % WorkspacePool::kAlignment, 0u);
  EXPECT_GE(first.bytes, 1000u);
  void* data = first.data;
  pool.giveBack(first);
  WorkspacePool::Block again = pool.take(640);
  EXPECT_EQ(again.data, data);
  pool.giveBack(again);
  WorkspacePool::Block larger = pool.take(5000); // past the kept block: a new one
  ASSERT_NE(larger.data, nullptr);
  EXPECT_GE(larger.bytes, 5000u);
  pool.giveBack(larger);
  WorkspacePool::Block kept = pool.take(5000); // the larger one was kept
  EXPECT_EQ(kept.data, larger.data);
  pool.giveBack(kept);
}

TEST(WorkspacePool, CallsAtOnceTakeTheirOwnBlocks) {
  WorkspacePool pool;
  pool.giveBack(pool.take(256));
  WorkspacePool::Block one = pool.take(256), other = pool.take(256);
  ASSERT_NE(one.data, nullptr);
  ASSERT_NE(other.data, nullptr);
  EXPECT_NE(one.data, other.data);
  pool.giveBack(one);
  pool.giveBack(other);
  pool.giveBack({}); // a failed allocation's empty block changes nothing
  WorkspacePool::Block kept = pool.take(256);
  EXPECT_TRUE(kept.data == one.data || kept.data == other.data);
  pool.giveBack(kept);
}

} // namespace
} // namespace attnc::mlirkernel
