// attnc run, attnc verify: a bundle through the runtime, on given or random inputs.
#include "Artifact/Manifest.h"
#include "CallSetup.h"
#include "Commands.h"
#include "Compare.h"
#include "Npy.h"
#include "Reference/Reference.h"
#include "attnc/DType.hpp"
#include "attnc/Runtime.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/core.h>
#include <memory>
#include <thread>

namespace attnc::tools {
namespace {

struct RunOptions {
  std::string bundle;
  CallFlags call;
  std::vector<std::string> params; // NAME=file.npy
  std::string out, lse, weights;
  int32_t threads = 0;
  int repeat = 1;
};

void addCallOptions(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("bundle", o.bundle, "a bundle .so from attnc compile")->required();
  cmd->add_option("--batch", o.call.batch, "batch size B (default: from --q, else 1)");
  cmd->add_option("--seq-q", o.call.seqQ, "query length Tq (default: from --q, else 128)");
  cmd->add_option("--seq-k", o.call.seqK, "key length Tk (default: from --k, else Tq)");
  for (const char* name : {"q", "k", "v", "mask", "bias"})
    cmd->add_option(
        std::string("--") + name,
        [&o, name](const CLI::results_t& r) {
          o.call.inputFiles[name] = r.front();
          return true;
        },
        std::string(name) + " as .npy (random from --seed when absent)");
  cmd->add_option(
      "--block-layout",
      [&o](const CLI::results_t& r) {
        o.call.inputFiles["block_layout"] = r.front();
        return true;
      },
      "block_layout as .npy");
  cmd->add_option("--lengths", o.call.lengths, "key lengths per batch: '5,7,0' or a .npy");
  cmd->add_option("--param", o.params, "a parameter tensor NAME=file.npy (repeatable)");
  cmd->add_option("--seed", o.call.seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--threads", o.threads, "threads (0: all)")->capture_default_str();
}

CallFlags withParams(const RunOptions& o) {
  CallFlags flags = o.call;
  for (const std::string& p : o.params) {
    size_t eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("--param " + p + ": expected NAME=file.npy");
    flags.inputFiles[p.substr(0, eq)] = p.substr(eq + 1);
  }
  return flags;
}

// Runs the bundle `repeat` times; returns the median time in milliseconds.
double timedRuns(const runtime::Bundle& bundle, Call& call, int32_t threads, int repeat) {
  std::vector<attnc_named_tensor> named = call.named();
  std::vector<double> ms;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    auto start = std::chrono::steady_clock::now();
    bundle.run(named, threads);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// 4 B H Tq Tk d (d the mean of d_k and d_v), halved for causal: the FLOPs of the two GEMMs.
double attentionFlops(const Spec& s, const RunSizes& z) {
  double flops = 2.0 * z[SizeSymbol::Batch] * s.heads * z[SizeSymbol::SeqQ] * z[SizeSymbol::SeqK] *
                 static_cast<double>(s.dK + s.dV);
  return s.masks.has(MaskKind::Causal) ? flops / 2 : flops;
}

std::string sizesText(const RunSizes& z) {
  return fmt::format("B={} Tq={} Tk={}", z[SizeSymbol::Batch], z[SizeSymbol::SeqQ],
                     z[SizeSymbol::SeqK]);
}

ParallelFor threadedFor(int32_t threads) {
  return [threads](int64_t count, const std::function<void(int64_t)>& body) {
    int32_t n = std::max<int32_t>(1, std::min<int64_t>(threads, count));
    std::atomic<int64_t> next{0};
    auto work = [&] {
      for (int64_t i = next++; i < count; i = next++)
        body(i);
    };
    std::vector<std::thread> helpers;
    for (int32_t t = 1; t < n; ++t)
      helpers.emplace_back(work);
    work();
    for (std::thread& h : helpers)
      h.join();
  };
}

Spec bundleSpec(const runtime::Bundle& bundle) {
  return manifestSpec(nlohmann::json::parse(bundle.manifest()));
}

} // namespace

Action addRunCommand(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a bundle on .npy or random inputs");
  addCallOptions(cmd, *o);
  cmd->add_option("--out", o->out, "write o to this .npy");
  cmd->add_option("--lse", o->lse, "write lse to this .npy (spec needs lse=true)");
  cmd->add_option("--weights", o->weights, "write weights to this .npy (spec needs weights=true)");
  cmd->add_option("--repeat", o->repeat, "runs to time (median)")->capture_default_str();
  return [o] {
    runtime::Bundle bundle = runtime::Bundle::open(o->bundle);
    Spec spec = bundleSpec(bundle);
    Call call = prepareCall(spec, withParams(*o));
    std::vector<std::pair<std::string, std::string>> outputs = {
        {"o", o->out}, {"lse", o->lse}, {"weights", o->weights}};
    for (const auto& [name, path] : outputs)
      if (!path.empty())
        (void)call.tensor(name); // an output the spec lacks is a usage error, before running
    double ms = timedRuns(bundle, call, o->threads, o->repeat);
    for (const auto& [name, path] : outputs)
      if (!path.empty())
        npy::write(path, call.tensor(name));
    fmt::print("ran {} ({}): {:.3f} ms median of {}, {:.2f} GFLOP/s (4*B*H*Tq*Tk*d{})\n", o->bundle,
               sizesText(call.sizes), ms, std::max(1, o->repeat),
               attentionFlops(spec, call.sizes) / (ms * 1e6),
               spec.masks.has(MaskKind::Causal) ? "/2" : "");
    return 0;
  };
}

Action addVerifyCommand(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Run a bundle and the f64 reference on the same inputs and compare (exit 1 past "
                "the dtype's tolerance)");
  addCallOptions(cmd, *o);
  return [o] {
    runtime::Bundle bundle = runtime::Bundle::open(o->bundle);
    Spec spec = bundleSpec(bundle);
    Call call = prepareCall(spec, withParams(*o));
    double ms = timedRuns(bundle, call, o->threads, 1);

    int32_t threads = o->threads > 0
                          ? o->threads
                          : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<HostTensor> expected = referenceOutputs(call, threadedFor(threads));

    const Tolerance tolerance = toleranceFor(spec.dtype);
    bool pass = true;
    fmt::print("verify {} ({}), kernel {:.3f} ms\n", o->bundle, sizesText(call.sizes), ms);
    size_t e = 0;
    for (size_t i = 0; i < call.arguments.size(); ++i) {
      if (call.arguments[i].role != ArgumentRole::Output)
        continue;
      Comparison c = compare(call.tensors[i].values(), expected[e++].values(), tolerance);
      pass = pass && c.failures == 0;
      fmt::print("  {:<8} max abs err {:.3e}  max rel err {:.3e}  {}\n", call.arguments[i].name,
                 c.maxAbsError, c.maxRelError,
                 c.failures == 0 ? "ok"
                                 : fmt::format("FAIL: {} elements past tolerance (first at flat "
                                               "index {})",
                                               c.failures, c.firstFailure));
    }
    fmt::print("{} (tolerance: abs {:.0e} + rel {:.0e} for {})\n", pass ? "PASS" : "FAIL",
               tolerance.absolute, tolerance.relative, dtypeName(spec.dtype));
    return pass ? 0 : 1;
  };
}

} // namespace attnc::tools
