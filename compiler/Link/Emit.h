// The artifacts a compile writes (--emit), and the two kinds of kernel the driver asks
// backends for internally when it builds one bundle of several kernels.
#ifndef ATTNC_COMPILER_LINK_EMIT_H
#define ATTNC_COMPILER_LINK_EMIT_H

#include <set>
#include <string_view>

namespace attnc {

enum class Emit {
  So,             // so: the bundle (a shared object) and its manifest
  Lib,            // lib: a static library and C++ header to link into applications
  HalideLibrary,  // a: Halide's own static library of the pipeline
  HalideHeader,   // h: its C header
  Object,         // obj
  Assembly,       // asm
  Stmt,           // stmt: Halide's lowered statement
  Mlir,           // mlir: the module after each stage's pipeline
  Llvm,           // llvm: the optimised LLVM IR
  Ptx,            // ptx: the GPU code
  BundlePart,     // internal: a shape-dispatch bundle's part (BundleWriter's writeBundlePart)
  SealedBundle,   // internal: a fat bundle's member, all but its entry local (sealBundle)
};
using EmitSet = std::set<Emit>;

// The --emit name of a kind a user may ask for; UsageError listing them for another.
Emit parseEmit(std::string_view name);
// Its --emit name ("part" and "sealed" for the internal kinds).
std::string_view emitName(Emit emit);

// Whether `emit` asks for a kernel (so, or a part or sealed one), not only other files.
bool emitsKernel(const EmitSet& emit);

} // namespace attnc

#endif // ATTNC_COMPILER_LINK_EMIT_H
