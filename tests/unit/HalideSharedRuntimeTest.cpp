// Halide bundles carry the Halide runtime, yet a process uses one copy of it: the runtime makes
// the first Halide bundle's halide_* symbols global and later bundles bind to them.
#include "Driver/Driver.h"
#include "TestSupport.h"
#include "attnc/Runtime.hpp"

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <gtest/gtest.h>

namespace attnc {
namespace {

namespace fs = std::filesystem;

std::atomic<int> allocations{0};

void* countingMalloc(void*, size_t bytes) {
  ++allocations;
  // Halide expects 64-byte aligned buffers from halide_malloc.
  return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
}

void plainFree(void*, void* p) {
  std::free(p);
}

using MallocHook = void* (*)(void*, size_t);
using FreeHook = void (*)(void*, void*);

TEST(HalideSharedRuntime, LaterBundlesUseTheFirstBundlesRuntime) {
  fs::path dir = fs::temp_directory_path() / ("attnc_shared_runtime_" + std::to_string(getpid()));
  fs::remove_all(dir);
  KernelRequest kernel;
  kernel.backend = "halide";
  const std::string firstSpec = "heads=2 d_k=16";
  std::string first =
      compileKernel(parseSpec(firstSpec), kernel, {Emit::So}, dir / "first").primary.string();
  const std::string secondSpec = "heads=2 d_k=32 mask=causal";
  std::string second =
      compileKernel(parseSpec(secondSpec), kernel, {Emit::So}, dir / "second").primary.string();

  runtime::Bundle a = runtime::Bundle::open(first);
  runtime::Bundle b = runtime::Bundle::open(second);

  // Install a counting allocator through the FIRST bundle's copy of the Halide runtime.
  void* handle = dlopen(first.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto setMalloc =
      reinterpret_cast<MallocHook (*)(MallocHook)>(dlsym(handle, "halide_set_custom_malloc"));
  auto setFree = reinterpret_cast<FreeHook (*)(FreeHook)>(dlsym(handle, "halide_set_custom_free"));
  ASSERT_TRUE(setMalloc && setFree);
  MallocHook oldMalloc = setMalloc(countingMalloc);
  FreeHook oldFree = setFree(plainFree);

  // Running the SECOND bundle allocates its state through that allocator: one runtime copy.
  tools::Call call = test::randomCall(secondSpec, 1, 70, 90);
  std::vector<attnc_named_tensor> named = call.named();
  b.run(named, 1);
  EXPECT_GT(allocations.load(), 0);

  setMalloc(oldMalloc);
  setFree(oldFree);
  dlclose(handle);
  fs::remove_all(dir);
}

} // namespace
} // namespace attnc
