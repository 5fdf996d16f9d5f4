// Building a bundle call from command-line flags: sizes, inputs from .npy files or seeded
// random data, and output buffers. Shared by `attnc run` and `attnc verify`.
#ifndef ATTNC_TOOLS_ATTNC_CALLSETUP_H
#define ATTNC_TOOLS_ATTNC_CALLSETUP_H

#include "Abi/Arguments.h"
#include "Reference/Reference.h"
#include "Support/HostTensor.h"
#include "attnc/attnc.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attnc::tools {

struct CallFlags {
  std::optional<int64_t> batch, seqQ, seqK;
  std::map<std::string, std::string> inputFiles; // argument name -> .npy path
  std::string lengths;                           // "5,7,0" or a .npy path
  uint64_t seed = 0;
};

struct Call {
  Spec spec;
  std::vector<Argument> arguments; // the entry's: kernelArguments or backwardArguments
  std::vector<HostTensor> tensors; // one per argument, in argument order
  RunSizes sizes;
  attnc_entry entry = ATTNC_ENTRY_FORWARD;

  std::vector<attnc_named_tensor> named();
  HostTensor& tensor(const std::string& name);
  const HostTensor& tensor(const std::string& name) const;
};

// "B=2 Tq=37 Tk=53".
std::string sizesText(const RunSizes& z);

// Sizes come from the given files first (q binds B and Tq, k binds Tk), then from flags, which
// must agree, then from defaults (B=1, Tq=128, Tk=Tq). Throws UsageError for unknown argument
// names, unreadable files or disagreeing sizes.
Call prepareCall(const Spec& spec, const CallFlags& flags);

// The backward call after the forward call ran, its tensors moved in (a process never holds
// them twice): its inputs, its o and lse as they are (a kernel's, as training passes them),
// grad_o drawn from `seed`, and the gradients to fill.
Call prepareBackwardCall(Call&& forward, uint64_t seed);

// The f64 reference on the call's inputs: one f64 tensor per output argument, in order (the
// gradients, for a backward call).
std::vector<HostTensor> referenceOutputs(Call& call, const ParallelFor& parallelFor);

// The fraction of score elements (b, h, i, j) the spec's masks keep on this call (1 without
// masks): the density that sparse patterns' time should be proportional to.
double maskDensity(Call& call);

struct IndexRange {
  int64_t begin = 0, end = 0; // [begin, end)
  int64_t size() const { return end - begin; }
};

// For each query in `queries` and key in `keys` (row-major), 1 when the spec's masks keep score
// (b, h, i, j) on this call, else 0.
std::vector<uint8_t> keptScores(Call& call, int64_t b, int64_t h, IndexRange queries,
                                IndexRange keys);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_CALLSETUP_H
