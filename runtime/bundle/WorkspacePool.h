// The workspace of an MLIR CPU kernel call (MlirKernel.cpp): a block a call has finished with
// is kept for the bundle's next call, the larger one when two calls ran at once. A long
// sequence's workspace (linear attention's rows at H 4, d 64, T 8192: 32 MiB) is past glibc's
// largest mmap threshold, so a block freed and allocated anew each call was mapped and zeroed
// page by page: 18.6 ms a call against 8.05 with the block kept (docs/benchmarks.md). Calls at
// the same time each take their own block.
#ifndef ATTNC_RUNTIME_BUNDLE_WORKSPACEPOOL_H
#define ATTNC_RUNTIME_BUNDLE_WORKSPACEPOOL_H

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <utility>

namespace attnc::mlirkernel {

class WorkspacePool {
  struct Block {
    void* data = nullptr;
    size_t bytes = 0;
  };

public:
  static constexpr size_t kAlignment = 64; // the offsets' alignment (attn-outline-tasks)
  // The largest block kept past its call (a bundle holds at most this much between calls);
  // larger ones, whose calls take long enough that the mapping weighs little, are freed.
  static constexpr size_t kKeptAtMost = size_t(1) << 30;

  // One call's block, given back to the pool when the lease ends.
  class Lease {
  public:
    Lease(WorkspacePool& pool, Block block) : pool(pool), block(block) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool.giveBack(block); }
    // The block's first byte, aligned to kAlignment; null when the allocation failed.
    void* data() const { return block.data; }

  private:
    WorkspacePool& pool;
    Block block;
  };

  WorkspacePool() = default;
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;
  ~WorkspacePool() { std::free(kept.data); }

  // A block of at least `bytes`: none for 0, the kept one when it is large enough, else a new
  // one (the kept one freed first if memory ran out).
  Lease take(size_t bytes) {
    if (bytes == 0)
      return Lease(*this, Block{});
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (kept.data && kept.bytes >= bytes)
        return Lease(*this, std::exchange(kept, Block{}));
    }
    const size_t rounded = (bytes + kAlignment - 1) & ~(kAlignment - 1);
    void* data = std::aligned_alloc(kAlignment, rounded);
    if (!data) {
      release();
      data = std::aligned_alloc(kAlignment, rounded);
    }
    return Lease(*this, Block{data, data ? rounded : 0});
  }

private:
  // Keeps the larger of `block` and the kept one, up to kKeptAtMost, and frees the other.
  void giveBack(Block block) {
    if (!block.data)
      return;
    if (block.bytes <= kKeptAtMost) {
      std::lock_guard<std::mutex> lock(mutex);
      if (block.bytes > kept.bytes)
        std::swap(block, kept);
    }
    std::free(block.data);
  }

  void release() {
    std::lock_guard<std::mutex> lock(mutex);
    std::free(std::exchange(kept, Block{}).data);
  }

  std::mutex mutex;
  Block kept;
};

} // namespace attnc::mlirkernel

#endif // ATTNC_RUNTIME_BUNDLE_WORKSPACEPOOL_H
