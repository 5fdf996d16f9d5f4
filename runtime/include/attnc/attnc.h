/* attnc runtime: the C interface between applications, the runtime and kernel bundles.
 *
 * A bundle is a shared object produced by `attnc compile`. It exports three symbols:
 *   attnc_kernel_abi       uint32_t, the ATTNC_ABI_VERSION it was built for;
 *   attnc_kernel_manifest  a NUL-terminated JSON manifest (spec, backend, target, arguments);
 *   attnc_kernel_run       the kernel entry, taking an attnc_kernel_call.
 * A fat bundle holds the kernel compiled for several targets (AVX2, AVX-512, ..., CUDA): its
 * manifest lists them, best first, under "targets", and it also exports
 *   attnc_kernel_target_runs  attnc_kernel_run_fn[], one entry per listed target;
 * its attnc_kernel_run runs the last (most widely supported) target.
 * Applications do not call these directly: they open a bundle with attnc_bundle_open, which
 * checks the ABI version and picks the first target this host supports (ATTNC_TARGET=<name>
 * forces one, for testing), and run it with attnc_bundle_run, which checks every tensor against
 * the manifest before the kernel sees it. A bundle compiled with backward=true also holds the
 * backward entry, which attnc_bundle_run_backward runs the same way on the manifest's
 * "backward" arguments (attnc_kernel_run sees it as the call's entry). A kernel linked into the
 * application ahead of time
 * (`attnc compile --emit lib`) is opened the same way from its attnc_kernel_exports.
 *
 * Tensors are DLPack DLTensors with explicit or compact strides. Every function is thread-safe:
 * one opened bundle may be run from many threads at once. */
#ifndef ATTNC_ATTNC_H
#define ATTNC_ATTNC_H

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change to attnc_kernel_call, to the exported symbols or to the manifest's
 * required fields. The runtime refuses bundles built for another version. */
#define ATTNC_ABI_VERSION 3u

#if defined(__GNUC__)
#define ATTNC_API __attribute__((visibility("default")))
#else
#define ATTNC_API
#endif

typedef enum attnc_status {
  ATTNC_OK = 0,
  ATTNC_ERROR_INVALID_ARGUMENT = 1,   /* null pointer, unknown or missing tensor name */
  ATTNC_ERROR_LOAD = 2,               /* the file cannot be loaded or is not a bundle */
  ATTNC_ERROR_ABI_MISMATCH = 3,       /* bundle built for another ATTNC_ABI_VERSION */
  ATTNC_ERROR_UNSUPPORTED_TARGET = 4, /* other architecture, or CPU features this host lacks */
  ATTNC_ERROR_MANIFEST = 5,           /* manifest missing, malformed or inconsistent */
  ATTNC_ERROR_TENSOR_MISMATCH = 6,    /* a tensor's device, dtype, shape or strides are wrong */
  ATTNC_ERROR_KERNEL = 7              /* the kernel itself reported a failure */
} attnc_status;

/* Filled by every call that can fail; message names what is wrong and what was expected. */
typedef struct attnc_error {
  attnc_status status;
  char message[1024];
} attnc_error;

/* ---- Kernel side: what the runtime passes to a bundle's attnc_kernel_run. ---- */

typedef void (*attnc_task_fn)(void* context, int64_t index);
/* Runs task(context, i) for every i in [0, count), on at most max_threads threads (the caller's
 * thread included), and returns when all are done. Provided by the runtime's thread pool. */
typedef void (*attnc_parallel_for_fn)(void* pool, int64_t count, attnc_task_fn task, void* context,
                                      int32_t max_threads);

/* The entries a bundle may hold: every bundle its forward, a backward=true one its backward. */
typedef enum attnc_entry { ATTNC_ENTRY_FORWARD = 0, ATTNC_ENTRY_BACKWARD = 1 } attnc_entry;

typedef struct attnc_kernel_call {
  uint32_t abi_version;        /* ATTNC_ABI_VERSION of the caller */
  uint32_t num_args;           /* the entry's argument count in the manifest */
  uint32_t entry;              /* attnc_entry: the one to run */
  DLTensor* const* args;       /* in manifest order, already checked against the manifest */
  int64_t batch, seq_q, seq_k; /* the run-time sizes B, Tq, Tk bound from the tensors */
  int32_t num_threads;         /* at least 1 */
  attnc_parallel_for_fn parallel_for;
  void* pool;
  void* stream; /* a CUDA stream for GPU bundles; NULL on CPU */
} attnc_kernel_call;

/* Returns 0 when the kernel ran; ATTNC_ERROR_TENSOR_MISMATCH when it refuses the call's tensors
 * (what its code cannot take, such as Halide's 32-bit indices or a tensor-core kernel's
 * alignment); any other value when it failed. Either way `message` says why. */
typedef int32_t (*attnc_kernel_run_fn)(const attnc_kernel_call* call, char* message,
                                       size_t message_size);

/* What a kernel provides to the runtime: a bundle's exports, or a kernel linked into the
 * application (`attnc compile --emit lib` defines one as `<name>_kernel`). */
typedef struct attnc_kernel_exports {
  uint32_t abi_version;                   /* ATTNC_ABI_VERSION it was built for */
  uint32_t num_targets;                   /* entries of target_runs: the manifest's targets */
  const char* manifest;                   /* NUL-terminated JSON */
  attnc_kernel_run_fn run;                /* runs the last target (or the only one) */
  const attnc_kernel_run_fn* target_runs; /* NULL when the manifest lists no "targets" */
} attnc_kernel_exports;

/* ---- Application side. ---- */

typedef struct attnc_bundle attnc_bundle;

typedef struct attnc_named_tensor {
  const char* name; /* a manifest argument name: "q", "k", "v", "o", "lse", "lengths", ... */
  DLTensor* tensor;
} attnc_named_tensor;

typedef struct attnc_run_options {
  int32_t num_threads; /* 0: all hardware threads */
  void* stream;        /* GPU bundles only: kernels are launched on this stream (NULL: the
                        * default stream) and attnc_bundle_run returns without waiting for
                        * them, as CUDA libraries do; synchronize it before reading outputs */
} attnc_run_options;

ATTNC_API uint32_t attnc_runtime_abi_version(void);
ATTNC_API const char* attnc_status_name(attnc_status status);

/* Loads a bundle and checks its ABI version, manifest and target against this host. */
ATTNC_API attnc_status attnc_bundle_open(const char* path, attnc_bundle** bundle,
                                         attnc_error* error);
/* Opens a kernel linked into the application (see attnc_kernel_exports) with the same checks
 * and target choice as attnc_bundle_open. */
ATTNC_API attnc_status attnc_bundle_open_linked(const attnc_kernel_exports* exports,
                                                attnc_bundle** bundle, attnc_error* error);
ATTNC_API void attnc_bundle_close(attnc_bundle* bundle);
/* The name of the target the bundle runs ("x86-64-avx512", "cuda-sm_90", "host", ...) and why
 * it was chosen, naming the targets passed over and what this host lacks for each; both owned
 * by the bundle. */
ATTNC_API const char* attnc_bundle_target(const attnc_bundle* bundle);
ATTNC_API const char* attnc_bundle_target_choice(const attnc_bundle* bundle);
/* The manifest JSON; owned by the bundle, valid until attnc_bundle_close. */
ATTNC_API const char* attnc_bundle_manifest(const attnc_bundle* bundle);

/* Checks every tensor against the manifest (names, device, dtype, shape, strides), binds the
 * run-time sizes B, Tq, Tk, then runs the kernel. Every manifest argument must be given once. */
ATTNC_API attnc_status attnc_bundle_run(const attnc_bundle* bundle,
                                        const attnc_named_tensor* tensors, size_t num_tensors,
                                        const attnc_run_options* options, attnc_error* error);

/* As attnc_bundle_run, for the backward entry of a bundle compiled with backward=true: the
 * tensors are the manifest's "backward" arguments (the forward's inputs, o and lse, grad_o, and
 * a grad_<name> output for each learnable argument). ATTNC_ERROR_INVALID_ARGUMENT for a bundle
 * without one. */
ATTNC_API attnc_status attnc_bundle_run_backward(const attnc_bundle* bundle,
                                                 const attnc_named_tensor* tensors,
                                                 size_t num_tensors,
                                                 const attnc_run_options* options,
                                                 attnc_error* error);

#ifdef __cplusplus
}
#endif

#endif /* ATTNC_ATTNC_H */
