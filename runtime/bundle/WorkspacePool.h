// The workspace of an MLIR CPU kernel call (MlirKernel.cpp): the block of the last call that
// finished is kept for the next one of the bundle. A long sequence's workspace (linear
// attention's rows at H 4, d 64, T 8192: 32 MiB) is past glibc's largest mmap threshold, so a
// block freed and allocated anew each call was mapped and zeroed page by page: 8 of its 20 ms.
// Calls at the same time each take their own block; the larger one is kept.
#ifndef ATTNC_RUNTIME_BUNDLE_WORKSPACEPOOL_H
#define ATTNC_RUNTIME_BUNDLE_WORKSPACEPOOL_H

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <utility>

namespace attnc::mlirkernel {

class WorkspacePool {
public:
  static constexpr size_t kAlignment = 64; // the offsets' alignment (attn-outline-tasks)

  struct Block {
    void* data = nullptr;
    size_t bytes = 0;
  };

  WorkspacePool() = default;
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;
  ~WorkspacePool() { std::free(kept.data); }

  // A block of at least `bytes`, aligned: the kept one when it is large enough, else a new one
  // (data null when the allocation failed).
  Block take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (kept.data && kept.bytes >= bytes)
        return std::exchange(kept, Block{});
    }
    const size_t rounded = (bytes + kAlignment - 1) & ~(kAlignment - 1);
    return {std::aligned_alloc(kAlignment, rounded), rounded};
  }

  // Keeps the larger of `block` and the kept one, and frees the other.
  void giveBack(Block block) {
    if (!block.data)
      return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (block.bytes > kept.bytes)
        std::swap(block, kept);
    }
    std::free(block.data);
  }

private:
  std::mutex mutex;
  Block kept;
};

} // namespace attnc::mlirkernel

#endif // ATTNC_RUNTIME_BUNDLE_WORKSPACEPOOL_H
