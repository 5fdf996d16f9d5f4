// The kernel entry of MLIR bundles: DLPack tensors become memref descriptors, and the
// kernel's tasks (one per batch, head and query tile) run on the attnc runtime's thread pool.
//
// The llvm stage made two C-interface functions from the kernel (attn-outline-tasks):
//   int64_t _mlir_ciface_attnc_mlir_kernel_tasks(Memref *arg0, ...)
//   void    _mlir_ciface_attnc_mlir_kernel_run(int64_t first, int64_t last, Memref *arg0, ...)
// with one descriptor per argument of the manifest, in its order.
#include "attnc/attnc.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <utility>

extern "C" {
// Declared without parameters: they are called through pointers of the right arity below.
void _mlir_ciface_attnc_mlir_kernel_tasks();
void _mlir_ciface_attnc_mlir_kernel_run();
__attribute__((visibility("protected"))) int32_t
attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t messageSize);
}

namespace {

constexpr uint32_t kMaxArgs = 12;
constexpr int kMaxRank = 4;

// MLIR's memref descriptor: {allocated, aligned, offset, sizes[rank], strides[rank]}; sizes
// and strides are contiguous, so one layout with room for the largest rank serves all ranks.
struct Memref {
  void* allocated;
  void* aligned;
  int64_t offset;
  int64_t sizesAndStrides[2 * kMaxRank];
};

Memref describe(const DLTensor& t) {
  Memref m{};
  m.allocated = m.aligned = static_cast<char*>(t.data) + t.byte_offset;
  int64_t compact = 1;
  for (int k = t.ndim - 1; k >= 0; --k) {
    m.sizesAndStrides[k] = t.shape[k];
    m.sizesAndStrides[t.ndim + k] = t.strides ? t.strides[k] : compact;
    compact *= t.shape[k];
  }
  return m;
}

template <size_t> using MemrefArg = Memref*;

template <size_t... I> int64_t countTasks(Memref** args, std::index_sequence<I...>) {
  using Fn = int64_t (*)(MemrefArg<I>...);
  return reinterpret_cast<Fn>(&_mlir_ciface_attnc_mlir_kernel_tasks)(args[I]...);
}

template <size_t... I>
void runTasks(int64_t first, int64_t last, Memref** args, std::index_sequence<I...>) {
  using Fn = void (*)(int64_t, int64_t, MemrefArg<I>...);
  reinterpret_cast<Fn> (&_mlir_ciface_attnc_mlir_kernel_run)(first, last, args[I]...);
}

template <size_t N> struct Arity {
  static int64_t tasks(Memref** a) { return countTasks(a, std::make_index_sequence<N>()); }
  static void run(int64_t f, int64_t l, Memref** a) {
    runTasks(f, l, a, std::make_index_sequence<N>());
  }
};

struct Entry {
  int64_t (*tasks)(Memref**);
  void (*run)(int64_t, int64_t, Memref**);
};

template <size_t... N>
constexpr std::array<Entry, sizeof...(N)> entries(std::index_sequence<N...>) {
  return {Entry{&Arity<N>::tasks, &Arity<N>::run}...};
}
constexpr auto kEntries = entries(std::make_index_sequence<kMaxArgs + 1>());

struct Launch {
  Entry entry;
  Memref** args;
};

void runOne(void* opaque, int64_t task) {
  auto* launch = static_cast<Launch*>(opaque);
  launch->entry.run(task, task + 1, launch->args);
}

} // namespace

extern "C" int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message,
                                    size_t messageSize) {
  if (call->abi_version != ATTNC_ABI_VERSION) {
    std::snprintf(message, messageSize, "caller uses ABI version %u; this bundle has %u",
                  call->abi_version, ATTNC_ABI_VERSION);
    return 1;
  }
  if (call->num_args > kMaxArgs) {
    std::snprintf(message, messageSize, "mlir bundle: %u arguments, at most %u supported",
                  call->num_args, kMaxArgs);
    return 1;
  }
  std::array<Memref, kMaxArgs> descriptors;
  std::array<Memref*, kMaxArgs> pointers;
  for (uint32_t a = 0; a < call->num_args; ++a) {
    descriptors[a] = describe(*call->args[a]);
    pointers[a] = &descriptors[a];
  }
  Launch launch{kEntries[call->num_args], pointers.data()};
  int64_t tasks = launch.entry.tasks(pointers.data());
  call->parallel_for(call->pool, tasks, runOne, &launch, call->num_threads);
  return 0;
}
