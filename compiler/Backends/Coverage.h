// The capability table: what a code generator computes, per device of targets. Each backend
// (Backend.h) and the bench's unfused baseline declare their rows once; refusals, `attnc
// backends`, the numerics tests, the README's coverage table and the choice of `--backend auto`
// all read them.
#ifndef ATTNC_COMPILER_BACKENDS_COVERAGE_H
#define ATTNC_COMPILER_BACKENDS_COVERAGE_H

#include "Abi/Target.h"
#include "Spec/Spec.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

// Score modifiers and outputs as the spec names them (alibi=, softcap=, ..., the expressions
// score_mod= and mask_mod=, the softmax's sinks=, where keys live: kv_cache=contiguous or
// kv_cache=paged, and kv_dtype=int8 or fp8_e4m3; lse=, weights=).
enum class Modifier {
  Alibi,
  Softcap,
  Bias,
  Rope,
  Dropout,
  ScoreMod,
  MaskMod,
  Sinks,
  ContiguousKvCache,
  PagedKvCache,
  Int8KvCache,
  Fp8KvCache,
  KvAppend // the runtime writes the new rows into a host cache
};
// Backward: the bundle's backward entry (backward=true), with the gradients of every tensor
// its modifiers and variant read (a row listing bias or sinks writes theirs); AuxGradients:
// the gradients it also writes of float aux tensors (aux= tensors score_mod reads);
// SavedProjections: mha's projections and heads' output returned for the backward
// (save_projections=true).
enum class Output { O, Lse, Weights, Backward, AuxGradients, SavedProjections };

// One row: a spec is covered when its variant, each of its masks, modifiers and outputs, and its
// dtype are listed.
struct Coverage {
  Device device;
  std::vector<Variant> variants;
  std::vector<MaskKind> masks;
  std::vector<Modifier> modifiers;
  std::vector<Output> outputs;
  std::vector<DType> dtypes;
  // Covered masks whose masked keys these kernels still visit, testing each score (their tiles
  // are bounded coarser than the pattern: residue classes not gathered, key blocks larger than
  // the pattern's blocks): `--backend auto` prefers a backend that skips them.
  std::vector<MaskKind> elementwiseMasks;
  // Why what is missing is missing: each reason for the gaps whose text (as firstGap writes
  // it: "variant=mha", "backward=true") starts with its `gaps`.
  struct GapReason {
    std::string_view gaps, why;
  };
  std::vector<GapReason> gapReasons;
  // How its kernels run decode steps (Tq <= 16 rows against a long Tk), for `attnc backends`:
  // a kernel of their own, or the prefill kernel and what that costs ("" for a reference).
  std::string_view decode;
  // How its kernels multiply bf16 and f16 operands: a unit that takes them (AMX tiles, tensor
  // cores) and where, or widened to f32 ("" for a reference).
  std::string_view products;
};

// Everything: a row for a code generator with no gaps on `device`.
Coverage fullCoverage(Device device);

// The first feature of `spec` the row leaves out, as the spec writes it ("variant=linear",
// "mask=strided", "rope", "dtype=bf16", "weights"); nullopt when the row covers the spec.
std::optional<std::string> firstGap(const Coverage& row, const Spec& spec);

// How many of the outputs of `spec` the row lists.
size_t coveredOutputs(const Coverage& row, const Spec& spec);

// Whether another backend should run the spec where it covers it: the spec has one of the row's
// elementwise masks.
bool defersToAnother(const Coverage& row, const Spec& spec);

// The row in spec terms: "variant=sdpa; masks causal padding ...; modifiers ...; ...".
std::string describeCoverage(const Coverage& row);

// Why the row leaves out `gap` (firstGap's text), or "" where it does not say.
std::string_view gapReason(const Coverage& row, std::string_view gap);

// {"family", "variants", "masks", "modifiers", "outputs", "dtypes"[, "gap_reasons": {gaps:
// why}]}.
nlohmann::json coverageJson(const Coverage& row);

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_COVERAGE_H
