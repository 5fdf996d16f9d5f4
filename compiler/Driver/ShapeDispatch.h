// Shape-dispatch bundles: one bundle holding a kernel per tuned shape bucket of a spec (each
// with its own backend and schedule), and an entry that picks one per call by (Tq, Tk)
// (runtime/bundle/ShapeDispatchKernel.cpp).
//
// Each bucket's kernel is compiled by its backend as a part (BundleWriter's writeBundlePart);
// its generated functions are renamed apart (objcopy, with every other symbol of the kernel
// object made local), and one link puts them together with each backend's entry library, one
// copy of shared objects (the Halide runtime), the dispatch entry and a generated table.
#ifndef ATTNC_COMPILER_DRIVER_SHAPEDISPATCH_H
#define ATTNC_COMPILER_DRIVER_SHAPEDISPATCH_H

#include "Driver/Driver.h"

#include <optional>
#include <string>
#include <vector>

namespace attnc {

// Gives `kernel` the tuned schedules of its spec and target, which come longest shape bucket
// first (findTunedSchedules). Two
// or more become a shape-dispatch bundle when the artifacts asked for are only a kernel (so, and
// lib's library of it) for a CPU target; otherwise the first one (and its backend) is used, and
// the note returned says which schedules were left out.
std::optional<std::string> useTunedSchedules(KernelRequest& kernel, const EmitSet& emit,
                                             std::vector<ShapeSchedule> tuned);

// The longest query the decode kernel of a bundle runs; longer ones run its other kernels.
// Chosen by the measured crossover (docs/benchmarks.md, "Decode").
inline constexpr int64_t kDecodeRows = 16;

// The kernels of a bundle that decodes too: `kernel`'s own (its shape schedules, or its backend
// and schedule) for Tq > kDecodeRows, tuned buckets of shorter queries left out, and the decode
// kernel of the request's backend (auto: the one it picks) for Tq <= kDecodeRows, when that
// backend has one for the spec and target (Backend::decodeSchedule). Empty when there is no
// such kernel, when kernel.withDecode is false, or when `emit` asks for more than the bundle.
std::vector<ShapeSchedule> decodingSchedules(const Spec& spec, const KernelRequest& kernel,
                                             const EmitSet& emit);

// Throws UsageError for what cannot be a shape-dispatch bundle (emit other than so, a CUDA
// target, parts whose arguments differ), JobError when a tool fails.
CompileResult compileShapeDispatch(const Spec& spec, const KernelRequest& kernel,
                                   const EmitSet& emit, const std::filesystem::path& outDir);

} // namespace attnc

#endif // ATTNC_COMPILER_DRIVER_SHAPEDISPATCH_H
