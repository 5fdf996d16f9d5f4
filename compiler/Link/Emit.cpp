#include "Link/Emit.h"

#include "Support/Errors.h"

#include <array>

namespace attnc {
namespace {

// The kinds a user may ask for, in --emit's order.
constexpr std::array kUserKinds{Emit::So,     Emit::Lib,  Emit::HalideLibrary, Emit::HalideHeader,
                                Emit::Object, Emit::Assembly, Emit::Stmt,      Emit::Mlir,
                                Emit::Llvm,   Emit::Ptx};

} // namespace

Emit parseEmit(std::string_view name) {
  for (Emit emit : kUserKinds)
    if (emitName(emit) == name)
      return emit;
  std::string known;
  for (Emit emit : kUserKinds)
    known += (known.empty() ? "" : ", ") + std::string(emitName(emit));
  throw UsageError("--emit " + std::string(name) + ": not an artifact attnc writes; known: " +
                   known);
}

std::string_view emitName(Emit emit) {
  switch (emit) {
  case Emit::So:
    return "so";
  case Emit::Lib:
    return "lib";
  case Emit::HalideLibrary:
    return "a";
  case Emit::HalideHeader:
    return "h";
  case Emit::Object:
    return "obj";
  case Emit::Assembly:
    return "asm";
  case Emit::Stmt:
    return "stmt";
  case Emit::Mlir:
    return "mlir";
  case Emit::Llvm:
    return "llvm";
  case Emit::Ptx:
    return "ptx";
  case Emit::BundlePart:
    return "part";
  case Emit::SealedBundle:
    return "sealed";
  }
  return "unknown"; // not reached: every kind is named above
}

bool emitsKernel(const EmitSet& emit) {
  return emit.count(Emit::So) || emit.count(Emit::BundlePart) || emit.count(Emit::SealedBundle);
}

} // namespace attnc
