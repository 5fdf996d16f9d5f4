// attnc bench: a bundle's speed, side by side in one process with the unfused baseline a user
// would otherwise write (OpenBLAS sgemm, softmax, sgemm) and, when asked, another bundle of the
// same spec (--against, e.g. the other backend) and the f64 reference.
// Runs are interleaved so that machine noise hits all of them alike; medians are reported.
#include "Commands.h"
#include "DeviceCall.h"
#include "RunSupport.h"
#include "UnfusedBaseline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/core.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sys/resource.h>

namespace attnc::tools {
namespace {

struct BenchOptions {
  RunOptions run;
  std::string against;   // another bundle of the same spec (the other backend, say)
  std::string attention; // mha: an sdpa bundle the baseline runs between its GEMMs
  int warmup = 2, runs = 10;
  bool json = false, noBaseline = false, reference = false, flushCaches = false;
  bool maskDensity = false, backward = false;
};

// FlashAttention's convention: a backward does 2.5 times the forward's FLOPs (five products of
// the score matrix's size against the forward's two).
constexpr double kBackwardFlops = 2.5;

struct Timing {
  std::string name, what;
  std::vector<double> ms;
  double percentile(double p) const {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5))];
  }
};

template <class F> double millis(F&& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double peakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0; // ru_maxrss is in KiB on Linux
}

} // namespace

Action addBenchCommand(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time a bundle against the unfused OpenBLAS baseline in the same process");
  addCallOptions(cmd, o->run);
  cmd->add_option("--warmup", o->warmup, "untimed runs first")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--runs", o->runs, "timed runs of each (interleaved)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--against", o->against,
                  "another bundle of the same spec, or of a spec taking a subset of its tensors "
                  "(sdpa against linear, say), timed interleaved on the same inputs");
  cmd->add_option("--attention", o->attention,
                  "variant=mha: the baseline's attention is this sdpa bundle (same heads, dims "
                  "and mask, layout=bshd, dtype=f32) between its OpenBLAS GEMMs");
  cmd->add_flag("--json", o->json, "print the figures as JSON");
  cmd->add_flag("--mask-density", o->maskDensity,
                "also report the fraction of scores the masks keep (evaluated element by element: "
                "B x H x Tq x Tk mask tests)");
  cmd->add_flag("--no-baseline", o->noBaseline, "time the bundle alone (for its peak memory)");
  cmd->add_flag("--reference", o->reference, "also time the f64 reference (small shapes)");
  cmd->add_flag("--backward", o->backward,
                "time the backward entry (a bundle compiled with backward=true) on the forward's "
                "o and lse and a random grad_o; FLOPs are 2.5x the forward's");
  cmd->add_flag("--flush-caches", o->flushCaches,
                "flush the CPU caches before each bundle run (GPU runs always flush the L2)");
  return [o] {
    runtime::Bundle bundle = runtime::Bundle::open(o->run.bundle);
    Spec spec = bundleSpec(bundle);
    Call call = prepareCall(spec, withParams(o->run));
    const int32_t threads = threadsOrAll(o->run.threads);
    if (o->backward) {
      if (!spec.backward)
        throw UsageError("--backward: " + o->run.bundle +
                         " has no backward entry; compile its spec with backward=true");
      timedRuns(bundle, call, threads, 1); // the forward's o and lse, which the backward reads
      call = prepareBackwardCall(std::move(call), o->run.call.seed);
    }
    TimedCall device(bundle, call, o->flushCaches);

    std::vector<Timing> timings{{"kernel", "the bundle through the runtime", {}}};
    std::optional<runtime::Bundle> other;
    std::vector<attnc_named_tensor> otherTensors;
    std::string againstWhat = o->against;
    if (!o->against.empty()) {
      other = runtime::Bundle::open(o->against);
      // Another spec is allowed when it takes a subset of this call's tensors (linear
      // attention against sdpa on the same q, k, v): the runtime checks their shapes.
      const Spec otherSpec = bundleSpec(*other);
      otherTensors = device.named();
      if (otherSpec.canonical() != spec.canonical()) {
        std::vector<Argument> wanted =
            o->backward ? backwardArguments(otherSpec) : kernelArguments(otherSpec);
        std::erase_if(otherTensors, [&](const attnc_named_tensor& t) {
          return std::none_of(wanted.begin(), wanted.end(),
                              [&](const Argument& a) { return a.name == t.name; });
        });
        if (otherTensors.size() != wanted.size())
          throw UsageError("--against " + o->against + ": compiled from " +
                           otherSpec.canonical() + ", which takes tensors this call (" +
                           spec.canonical() + ") does not have; it must take a subset of them");
        againstWhat = o->against + " (" + otherSpec.canonical() + ")";
      }
      if (runsOnGpu(*other) != runsOnGpu(bundle))
        throw UsageError("--against " + o->against +
                         ": built for another device; both bundles "
                         "must run on the CPU or both on the GPU");
      timings.push_back({"against", againstWhat, {}});
    }
    if (!o->attention.empty() &&
        (o->noBaseline || o->backward || bench::UnfusedBaseline::unsupported(spec)))
      throw UsageError("--attention " + o->attention +
                       ": the unfused baseline does not run for this call, so it has no use");
    std::unique_ptr<bench::UnfusedBaseline> baseline;
    std::optional<runtime::Bundle> attention;
    std::string baselineNote = "not run (--no-baseline)";
    if (o->backward && !o->noBaseline) {
      baselineNote = "not run (the unfused baseline has no backward)";
    } else if (!o->noBaseline) {
      if (auto why = bench::UnfusedBaseline::unsupported(spec)) {
        baselineNote = *why;
      } else {
        baseline = std::make_unique<bench::UnfusedBaseline>(call);
        std::string what = bench::UnfusedBaseline::describe(spec);
        if (!o->attention.empty()) {
          attention = runtime::Bundle::open(o->attention);
          baseline->useAttentionBundle(*attention);
          what = "OpenBLAS GEMMs around " + o->attention;
        }
        timings.push_back({"unfused", what, {}});
      }
    }
    std::vector<HostTensor> referenceOut;
    if (o->reference)
      timings.push_back({"reference", "the f64 reference", {}});

    auto runAll = [&](bool timed) {
      size_t t = 0;
      double ms = device.millis(bundle, threads);
      if (timed)
        timings[t].ms.push_back(ms);
      if (other) {
        try {
          ms = device.millis(*other, threads, otherTensors);
        } catch (const runtime::Error& e) { // say which of the two bundles refused the call
          attnc_error named{e.status(), {}};
          std::snprintf(named.message, sizeof(named.message), "--against %s: %s",
                        o->against.c_str(), e.what());
          throw runtime::Error(named);
        }
        if (timed)
          timings[++t].ms.push_back(ms);
      }
      if (baseline) {
        ms = millis([&] { baseline->run(threads); });
        if (timed)
          timings[++t].ms.push_back(ms);
      }
      if (o->reference) {
        ms = millis([&] { referenceOut = referenceOutputs(call, threadedFor(threads)); });
        if (timed)
          timings[++t].ms.push_back(ms);
      }
    };
    for (int w = 0; w < o->warmup; ++w)
      runAll(false);
    for (int r = 0; r < std::max(1, o->runs); ++r)
      runAll(true);

    // The baseline must compute what the kernel computes, or the comparison means nothing.
    double baselineDiff = 0;
    if (baseline) {
      if (other) // the other bundle wrote o last
        device.millis(bundle, threads);
      device.copyOutputsBack();
      const std::vector<double> kernelOut = call.tensor("o").values();
      const std::vector<float> baselineOut = baseline->output();
      for (size_t e = 0; e < kernelOut.size(); ++e)
        baselineDiff = std::max(baselineDiff, std::fabs(kernelOut[e] - baselineOut[e]));
    }
    const double flops = attentionFlops(spec, call.sizes) * (o->backward ? kBackwardFlops : 1);
    const double kernelMedian = timings[0].percentile(0.5);
    nlohmann::json report = {{"bundle", o->run.bundle},
                             {"spec", spec.canonical()},
                             {"batch", call.sizes[SizeSymbol::Batch]},
                             {"seq_q", call.sizes[SizeSymbol::SeqQ]},
                             {"seq_k", call.sizes[SizeSymbol::SeqK]},
                             {"threads", threads},
                             {"runs", o->runs},
                             {"entry", o->backward ? "backward" : "forward"},
                             {"flops", flops},
                             {"peak_rss_mib", peakRssMiB()},
                             {"baseline", baseline ? "run" : baselineNote}};
    if (baseline)
      report["baseline_max_abs_diff"] = baselineDiff;
    if (o->maskDensity)
      report["mask_density"] = maskDensity(call);
    for (const Timing& t : timings) {
      double median = t.percentile(0.5);
      report["timings"][t.name] = {{"what", t.what},
                                   {"median_ms", median},
                                   {"p10_ms", t.percentile(0.1)},
                                   {"p90_ms", t.percentile(0.9)},
                                   {"gflops", flops / (median * 1e6)},
                                   {"kernel_speedup", median / kernelMedian}};
    }
    if (o->json) {
      fmt::print("{}\n", report.dump(2));
      return 0;
    }
    fmt::print("bench {}{} ({}), {} threads, {} runs each, interleaved\n", o->run.bundle,
               o->backward ? " backward" : "", sizesText(call.sizes), threads, o->runs);
    for (const Timing& t : timings) {
      double median = t.percentile(0.5);
      fmt::print("  {:<9} median {:9.3f} ms  p10 {:9.3f}  p90 {:9.3f}  {:8.2f} GFLOP/s", t.name,
                 median, t.percentile(0.1), t.percentile(0.9), flops / (median * 1e6));
      if (&t != &timings[0])
        fmt::print("  kernel is {:.2f}x faster", median / kernelMedian);
      fmt::print("  ({})\n", t.what);
    }
    if (baseline)
      fmt::print("  unfused and kernel outputs differ by at most {:.2e}\n", baselineDiff);
    else
      fmt::print("  unfused   {}\n", baselineNote);
    fmt::print("  FLOPs {}4*B*H*Tq*Tk*d{}; peak RSS {:.1f} MiB\n", o->backward ? "2.5 x " : "",
               spec.masks.has(MaskKind::Causal) ? "/2" : "", peakRssMiB());
    return 0;
  };
}

} // namespace attnc::tools
