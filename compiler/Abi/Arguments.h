// The kernel's argument list for a spec: names, roles, dtypes and symbolic shapes, in the order
// the manifest lists them and attnc_kernel_call passes them.
#ifndef ATTNC_COMPILER_ABI_ARGUMENTS_H
#define ATTNC_COMPILER_ABI_ARGUMENTS_H

#include "Spec/Spec.h"
#include "attnc/Shape.hpp"

#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

enum class ArgumentRole { Input, Param, Output };

// How a tool fills an argument the user did not give (attnc run/verify with random inputs).
enum class ArgumentFill {
  Normal,        // standard normal
  ScaledNormal,  // normal with variance 1/fan_in (fan_in: the last dimension), for weights
  Lengths,       // per-batch key lengths, uniform in [0, Tk]
  BlockTable,    // a paged cache's block table: distinct pages in shuffled order
  QueryOffsets,  // a ragged batch's cu_seqlens_q: its first sequence Tq rows, others [0, Tq]
  Int8Values,    // an int8 cache's rows: uniform in [-127, 127]
  Fp8Values,     // an fp8_e4m3 cache's rows: uniform in [-127, 127] rounded to E4M3, as bytes
  RowScales,     // either's scales: uniform in [1/256, 3/256], so rows are about unit size
  MaskBits,      // 0/1, mostly 1
  BlockLayout,   // 0/1 per block, half of them 1
  FavorFeatures, // FAVOR+ orthogonal features drawn from the spec's seed
  SmallIntegers, // i32 aux tensors: uniform in [0, 7]
  None,          // outputs
};

struct Argument {
  std::string name;
  ArgumentRole role;
  std::vector<std::string> dtypes; // accepted dtypes, as attnc/DType.hpp names them
  std::vector<DimExpr> shape;
  ArgumentFill fill;
  std::string doc;
  int fanInDim = -1; // ScaledNormal: the dimension the weight is contracted over
};

std::vector<Argument> kernelArguments(const Spec& spec);

// The backward entry's arguments (docs/spec.md, "Backward"): the forward's inputs and params,
// its o (and lse, and mha's q_proj, k_proj, v_proj and o_heads, where the spec returns them)
// as inputs, grad_o (dL/do, shaped as o), then a
// gradient grad_<name>, shaped and typed as its argument, for every argument a model may learn
// (learnable below), in the forward's order.
std::vector<Argument> backwardArguments(const Spec& spec);
// Whether training may take a gradient of the argument: a float input or param of the forward,
// omega aside (FAVOR+'s features are drawn from the seed, not learned).
bool learnable(const Argument& argument);
// The name of the gradient of argument `name`, and back: the argument a gradient's name names.
inline constexpr std::string_view kGradientPrefix = "grad_";
std::string gradientName(std::string_view name);
std::string learnedName(std::string_view gradient);
// Every name an argument of some spec's forward has, aux tensors aside: a param or aux tensor
// takes none of them, whatever the spec's other keys (docs/spec.md, "Checked when the spec is
// parsed"), nor a name beginning as the backward's gradients (gradientName).
const std::set<std::string>& builtinArgumentNames();
// The names a call passes beside the arguments (attnc_kernel_call's, the linked header's
// operator()), which an aux tensor, an argument too, does not take either.
inline constexpr std::string_view kCallParameters[] = {"num_threads", "stream"};
nlohmann::json argumentsToJson(const std::vector<Argument>& arguments);
std::string_view roleName(ArgumentRole role);

} // namespace attnc

#endif // ATTNC_COMPILER_ABI_ARGUMENTS_H
