// The argument shapes a kernel was compiled for, carried in its own code as text, so that its
// entry refuses tensors of other shapes even when the manifest the runtime checked them against
// was altered: an MLIR kernel reads every static size from its types, not from the tensors.
//
//   "q=B,4,Tq,64;k=B,2,Tk,64;v=B,2,Tk,64;o=B,4,Tq,64"
//
// one `name=dims` per manifest argument, in manifest order, each dim as attnc/Shape.hpp
// writes it.
#ifndef ATTNC_RUNTIME_BUNDLE_SHAPECONTRACT_H
#define ATTNC_RUNTIME_BUNDLE_SHAPECONTRACT_H

#include "attnc/Shape.hpp"
#include "attnc/attnc.h"

#include <optional>
#include <string>
#include <string_view>

namespace attnc {

// The symbol of the contract's text in an MLIR kernel object.
inline constexpr const char* kShapeContractSymbol = "attnc_mlir_kernel_shapes";
// The backward entry's, in a backward=true bundle.
inline constexpr const char* kBackwardShapeContractSymbol = "attnc_mlir_backward_shapes";

// The contract of `arguments` (anything with .name and .shape, a vector of DimExpr).
template <class Arguments> std::string shapeContract(const Arguments& arguments) {
  std::string text;
  for (const auto& arg : arguments) {
    text += (text.empty() ? "" : ";") + arg.name + "=";
    for (std::size_t d = 0; d < arg.shape.size(); ++d)
      text += (d ? "," : "") + arg.shape[d].str();
  }
  return text;
}

// Why the call's tensors break `contract` with the call's B, Tq and Tk, or empty when they
// keep it. A paged cache's page count, which the call does not carry, binds from the first
// tensor that has it.
inline std::optional<std::string> contractProblem(std::string_view contract,
                                                  const attnc_kernel_call& call) {
  RunSizes sizes;
  sizes[SizeSymbol::Batch] = call.batch;
  sizes[SizeSymbol::SeqQ] = call.seq_q;
  sizes[SizeSymbol::SeqK] = call.seq_k;
  uint32_t index = 0;
  while (!contract.empty()) {
    std::string_view entry = contract.substr(0, contract.find(';'));
    contract.remove_prefix(std::min(contract.size(), entry.size() + 1));
    const std::string_view name = entry.substr(0, entry.find('='));
    std::string_view dims = entry.substr(std::min(entry.size(), name.size() + 1));
    const std::string what = "tensor '" + std::string(name) + "'";
    if (index >= call.num_args)
      return "the call has " + std::to_string(call.num_args) +
             " tensors; this kernel was compiled for more (" + what + " is missing)";
    const DLTensor& t = *call.args[index++];
    const std::string rankProblem = what + " has rank " + std::to_string(t.ndim) +
                                    "; this kernel was compiled for " + std::string(entry);
    int rank = 0;
    for (; !dims.empty(); ++rank) {
      if (rank >= t.ndim)
        return rankProblem;
      std::string_view dim = dims.substr(0, dims.find(','));
      dims.remove_prefix(std::min(dims.size(), dim.size() + 1));
      const std::optional<DimExpr> expr = DimExpr::parse(dim);
      if (expr && expr->symbol == SizeSymbol::Pages && expr->binds() &&
          sizes[SizeSymbol::Pages] == 0)
        sizes[SizeSymbol::Pages] = t.shape[rank];
      const std::optional<int64_t> want = expr ? expr->evaluate(sizes) : std::nullopt;
      if (!want)
        return expr ? "the call gives no size for dimension '" + std::string(dim) + "' of " + what
                    : "its shape contract has a bad dimension '" + std::string(dim) + "'";
      if (!(t.shape[rank] == *want || (expr->broadcastable && t.shape[rank] == 1)))
        return what + " differs from the shapes this kernel was compiled for (" +
               std::string(entry) + ") in dimension " + std::to_string(rank) +
               "; the bundle's manifest disagrees with its code";
    }
    if (rank != t.ndim)
      return rankProblem;
  }
  if (index != call.num_args)
    return "the call has " + std::to_string(call.num_args) +
           " tensors; this kernel was compiled for " + std::to_string(index);
  return std::nullopt;
}

} // namespace attnc

#endif // ATTNC_RUNTIME_BUNDLE_SHAPECONTRACT_H
