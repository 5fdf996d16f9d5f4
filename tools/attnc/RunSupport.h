// What `attnc run`, `verify` and `bench` share: their flags, and timing and FLOP helpers.
#ifndef ATTNC_TOOLS_ATTNC_RUNSUPPORT_H
#define ATTNC_TOOLS_ATTNC_RUNSUPPORT_H

#include "CallSetup.h"
#include "Reference/Reference.h"
#include "attnc/Runtime.hpp"

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace attnc::tools {

struct RunOptions {
  std::string bundle;
  CallFlags call;
  std::vector<std::string> params; // NAME=file.npy
  std::string out, lse, weights;
  int32_t threads = 0;
  int repeat = 1;
};

// The bundle, shape, input-file, seed and thread flags.
void addCallOptions(CLI::App* cmd, RunOptions& o);
// The call flags with --param NAME=file.npy folded into the input files.
CallFlags withParams(const RunOptions& o);
// Each of `repeat` (at least 1) runs' time in milliseconds, sorted.
std::vector<double> timedRuns(const runtime::Bundle& bundle, Call& call, int32_t threads,
                              int repeat);
// 4 B H Tq Tk d (d the mean of d_k and d_v), halved for causal: the FLOPs of the two GEMMs.
double attentionFlops(const Spec& s, const RunSizes& z);
// A parallel loop on plain threads, for the in-process reference: a body's exception reaches
// the caller (forEachOnThreads).
ParallelFor threadedFor(int32_t threads);
int32_t threadsOrAll(int32_t threads);
Spec bundleSpec(const runtime::Bundle& bundle);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_RUNSUPPORT_H
