// The code generators' kernel entries guard themselves: a Halide entry refuses tensors its
// 32-bit indices cannot address, an MLIR entry refuses tensors of other shapes than its code
// was compiled for, whatever the manifest the runtime checked them against says. Either
// refusal is ATTNC_ERROR_TENSOR_MISMATCH, as the runtime's own: the tensors are wrong for this
// kernel, the kernel did not fail.
#include "Driver/Driver.h"
#include "TestSupport.h"
#include "attnc/Runtime.hpp"

#include <dlfcn.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <sys/mman.h>

namespace attnc {
namespace {

namespace fs = std::filesystem;

class KernelEntries : public ::testing::Test {
protected:
  std::string compile(const std::string& spec, const std::string& backend) {
    KernelRequest kernel;
    kernel.backend = backend;
    return compileKernel(parseSpec(spec), kernel, {Emit::So}, dir_).primary.string();
  }

  test::ScratchDir scratch_{"entry"};
  const fs::path& dir_ = scratch_.path();
};

// Address space that is reserved, never touched: room for a tensor the kernel must not read.
class Reservation {
public:
  explicit Reservation(size_t bytes)
      : bytes_(bytes),
        base_(mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)) {
  }
  ~Reservation() {
    if (base_ != MAP_FAILED)
      munmap(base_, bytes_);
  }
  void* base() const { return base_ == MAP_FAILED ? nullptr : base_; }

private:
  size_t bytes_;
  void* base_;
};

// A q batch stride of 2^32 elements was truncated to 0: batch 1 read batch 0's rows. Once
// refused as ATTNC_ERROR_KERNEL.
TEST_F(KernelEntries, HalideRefusesStridesPast32Bits) {
  tools::Call call = test::randomCall("heads=2 d_k=4", 2, 3, 3);
  const int64_t batchStride = int64_t{1} << 32;
  Reservation q((batchStride + 24) * sizeof(float));
  ASSERT_NE(q.base(), nullptr);
  int64_t strides[4] = {batchStride, 12, 4, 1};
  call.tensor("q").dl()->data = q.base();
  call.tensor("q").dl()->strides = strides;
  runtime::Bundle bundle = runtime::Bundle::open(compile("heads=2 d_k=4", "halide"));
  std::vector<attnc_named_tensor> named = call.named();
  try {
    bundle.run(named);
    FAIL() << "ran";
  } catch (const runtime::Error& e) {
    EXPECT_EQ(e.status(), ATTNC_ERROR_TENSOR_MISMATCH) << e.what();
    EXPECT_NE(std::string(e.what()).find("kernel argument 0 spans 4294967320 "
                                         "elements; Halide kernels index with 32 bits"),
              std::string::npos)
        << e.what();
  }
}

// The runtime passes what the manifest allows; an MLIR kernel writes what its types say. A
// manifest edited to a smaller o made it write past o.
TEST_F(KernelEntries, MlirRefusesShapesItWasNotCompiledFor) {
  tools::Call call = test::randomCall("heads=2 d_k=8", 1, 3, 3);
  const std::string path = compile("heads=2 d_k=8", "mlir");
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto run = reinterpret_cast<attnc_kernel_run_fn>(dlsym(handle, "attnc_kernel_run"));
  ASSERT_NE(run, nullptr);
  std::vector<DLTensor*> args;
  for (HostTensor& t : call.tensors)
    args.push_back(t.dl());
  attnc_kernel_call kernelCall{};
  kernelCall.abi_version = ATTNC_ABI_VERSION;
  kernelCall.num_args = static_cast<uint32_t>(args.size());
  kernelCall.args = args.data();
  kernelCall.batch = 1;
  kernelCall.seq_q = kernelCall.seq_k = 3;
  kernelCall.num_threads = 1;
  kernelCall.parallel_for = [](void*, int64_t count, attnc_task_fn task, void* context, int32_t) {
    for (int64_t i = 0; i < count; ++i)
      task(context, i);
  };
  char message[512] = "";
  EXPECT_EQ(run(&kernelCall, message, sizeof(message)), 0) << message;
  call.tensor("o").dl()->shape[3] = 4;
  EXPECT_EQ(run(&kernelCall, message, sizeof(message)), ATTNC_ERROR_TENSOR_MISMATCH);
  EXPECT_NE(std::string(message).find("tensor 'o' differs from the shapes this kernel was "
                                      "compiled for (o=B,2,Tq,8) in dimension 3"),
            std::string::npos)
      << message;
  call.tensor("o").dl()->ndim = 3;
  EXPECT_EQ(run(&kernelCall, message, sizeof(message)), ATTNC_ERROR_TENSOR_MISMATCH);
  EXPECT_NE(std::string(message).find("tensor 'o' has rank 3"), std::string::npos) << message;
  dlclose(handle);
}

} // namespace
} // namespace attnc
