// attnc run, attnc verify: a bundle through the runtime, on given or random inputs.
#include "Abi/Manifest.h"
#include "CallSetup.h"
#include "Commands.h"
#include "Compare.h"
#include "Npy.h"
#include "OutputFile.h"
#include "Reference/Reference.h"
#include "RunSupport.h"
#include "attnc/DType.hpp"
#include "attnc/Runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <fmt/core.h>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace attnc::tools {

Action addRunCommand(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a bundle on .npy or random inputs");
  addCallOptions(cmd, *o);
  cmd->add_option("--out", o->out, "write o to this .npy");
  cmd->add_option("--lse", o->lse, "write lse to this .npy (spec needs lse=true)");
  cmd->add_option("--weights", o->weights, "write weights to this .npy (spec needs weights=true)");
  cmd->add_option("--repeat", o->repeat, "runs to time (median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto verbose = std::make_shared<bool>(false);
  cmd->add_flag("-v,--verbose", *verbose,
                "say on stderr which of the bundle's targets runs, and why (ATTNC_TARGET=NAME "
                "forces one of a fat bundle's)");
  return [o, verbose] {
    runtime::Bundle bundle = runtime::Bundle::open(o->bundle);
    if (*verbose)
      fmt::print(stderr, "attnc: target {}\n", bundle.targetChoice());
    Spec spec = bundleSpec(bundle);
    Call call = prepareCall(spec, withParams(*o));
    std::vector<std::pair<std::string, std::string>> outputs = {
        {"o", o->out}, {"lse", o->lse}, {"weights", o->weights}};
    // An output the spec lacks, or a path that cannot be written, is refused before running.
    for (const auto& [name, path] : outputs)
      if (!path.empty()) {
        (void)call.tensor(name);
        checkOutputPath(path);
      }
    std::vector<double> times = timedRuns(bundle, call, o->threads, o->repeat);
    double ms = times[times.size() / 2];
    // Every output is written before any is renamed into place: all of them or none.
    std::vector<npy::PendingWrite> pending;
    for (const auto& [name, path] : outputs)
      if (!path.empty())
        pending.emplace_back(path, call.tensor(name));
    for (npy::PendingWrite& file : pending)
      file.commit();
    fmt::print("ran {} ({}): {:.3f} ms median of {}, {:.2f} GFLOP/s (4*B*H*Tq*Tk*d{})\n", o->bundle,
               sizesText(call.sizes), ms, o->repeat,
               attentionFlops(spec, call.sizes) / (ms * 1e6),
               spec.masks.has(MaskKind::Causal) ? "/2" : "");
    return 0;
  };
}

namespace {

// Each output of `call` against the reference's `expected`, a line each, within the tolerance
// `toleranceOf` gives it; true when every one passes.
bool compareOutputs(const Call& call, const std::vector<HostTensor>& expected,
                    const std::function<Tolerance(const Argument&)>& toleranceOf) {
  bool pass = true;
  size_t e = 0;
  for (size_t i = 0; i < call.arguments.size(); ++i) {
    const Argument& argument = call.arguments[i];
    if (argument.role != ArgumentRole::Output)
      continue;
    Comparison c = compare(call.tensors[i].values(), expected[e++].values(), toleranceOf(argument));
    pass = pass && c.failures == 0;
    fmt::print("  {:<8} max abs err {:.3e}  worst err/tol {:.3g}  {}\n", argument.name,
               c.maxAbsError, c.worstShare,
               c.failures == 0 ? "ok"
                               : fmt::format("FAIL: {} elements past tolerance (first at flat "
                                             "index {})",
                                             c.failures, c.firstFailure));
  }
  return pass;
}

// The bytes of each output of `call`, in argument order.
std::vector<std::vector<std::byte>> outputBytes(const Call& call) {
  std::vector<std::vector<std::byte>> bytes;
  for (size_t i = 0; i < call.arguments.size(); ++i)
    if (call.arguments[i].role == ArgumentRole::Output) {
      const auto* data = static_cast<const std::byte*>(call.tensors[i].data());
      bytes.emplace_back(data, data + call.tensors[i].bytes());
    }
  return bytes;
}

// Whether the backward entry run again, at 1 thread after `threads` or at 2 after 1 (on a GPU
// simply again), writes the same bits into every gradient, as the fixed order of every sum
// promises; a line saying which.
bool rerunIsBitIdentical(const runtime::Bundle& bundle, Call& call, int32_t threads) {
  const std::vector<std::vector<std::byte>> first = outputBytes(call);
  const int32_t rerun = threads > 1 ? 1 : 2;
  timedRuns(bundle, call, rerun, 1);
  const bool same = outputBytes(call) == first;
  fmt::print("  run again at {} thread(s): {}\n", rerun,
             same ? "bit-identical" : "FAIL: the gradients differ from the first run's");
  return same;
}

// The backward entry on the forward call's inputs and the kernel's own o and lse, against the
// reference's gradients, then run again for the same bits.
bool verifyBackward(const runtime::Bundle& bundle, Call&& forward, const RunOptions& o) {
  Call call = prepareBackwardCall(std::move(forward), o.call.seed);
  const double ms = timedRuns(bundle, call, o.threads, 1).front();
  std::vector<HostTensor> expected = referenceOutputs(call, threadedFor(threadsOrAll(o.threads)));
  fmt::print("backward, kernel {:.3f} ms\n", ms);
  const bool pass = compareOutputs(call, expected, [&](const Argument& gradient) {
    const std::string learned = learnedName(gradient.name);
    return toleranceFor(call.spec.dtype,
                        gradientReductionLength(call.spec, learned, call.sizes[SizeSymbol::Batch],
                                                call.sizes[SizeSymbol::SeqQ],
                                                call.sizes[SizeSymbol::SeqK]));
  });
  const bool deterministic = rerunIsBitIdentical(bundle, call, threadsOrAll(o.threads));
  fmt::print("{} (tolerance: the forward's for {}, over each gradient's longest sum)\n",
             pass && deterministic ? "PASS" : "FAIL", dtypeName(call.spec.dtype));
  return pass && deterministic;
}

} // namespace

Action addVerifyCommand(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto backward = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "verify", "Run a bundle and the f64 reference on the same inputs and compare (exit 1 past "
                "the dtype's tolerance)");
  addCallOptions(cmd, *o);
  cmd->add_flag("--backward", *backward,
                "also run the backward entry (a bundle compiled with backward=true) on the "
                "forward's o and lse and a random grad_o, and compare every gradient");
  return [o, backward] {
    runtime::Bundle bundle = runtime::Bundle::open(o->bundle);
    Spec spec = bundleSpec(bundle);
    if (*backward && !spec.backward)
      throw UsageError("--backward: " + o->bundle +
                       " has no backward entry; compile its spec with backward=true");
    Call call = prepareCall(spec, withParams(*o));
    double ms = timedRuns(bundle, call, o->threads, 1).front();

    std::vector<HostTensor> expected =
        referenceOutputs(call, threadedFor(threadsOrAll(o->threads)));

    const Tolerance tolerance =
        toleranceFor(spec.dtype, reductionLength(spec, call.sizes[SizeSymbol::SeqK]));
    fmt::print("verify {} ({}), kernel {:.3f} ms\n", o->bundle, sizesText(call.sizes), ms);
    bool pass = compareOutputs(call, expected, [&](const Argument&) { return tolerance; });
    fmt::print("{} (tolerance: abs {:.1e} + rel {:.1e} for {} over sums of up to {} terms)\n",
               pass ? "PASS" : "FAIL", tolerance.absolute, tolerance.relative,
               dtypeName(spec.dtype), reductionLength(spec, call.sizes[SizeSymbol::SeqK]));
    if (*backward)
      pass = verifyBackward(bundle, std::move(call), *o) && pass;
    return pass ? 0 : 1;
  };
}

} // namespace attnc::tools
