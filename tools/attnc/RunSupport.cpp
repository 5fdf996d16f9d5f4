#include "RunSupport.h"

#include "Abi/Manifest.h"
#include "DeviceCall.h"
#include "Support/Threads.h"

#include <algorithm>
#include <fmt/core.h>
#include <thread>

namespace attnc::tools {

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
  cmd->add_option("--param", o.params, "a parameter or aux tensor NAME=file.npy (repeatable)");
  cmd->add_option("--seed", o.call.seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--threads", o.threads, "threads (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
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

std::vector<double> timedRuns(const runtime::Bundle& bundle, Call& call, int32_t threads,
                              int repeat) {
  TimedCall timed(bundle, call);
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r)
    ms.push_back(timed.millis(bundle, threads));
  timed.copyOutputsBack();
  std::sort(ms.begin(), ms.end());
  return ms;
}

double attentionFlops(const Spec& s, const RunSizes& z) {
  // Every sequence's rows: B x Tq, or a ragged batch's total_q.
  const double rows = s.raggedQueries ? static_cast<double>(z[SizeSymbol::QueryRows])
                                      : static_cast<double>(z[SizeSymbol::Batch] * z[SizeSymbol::SeqQ]);
  double flops = 2.0 * rows * s.heads * z[SizeSymbol::SeqK] * static_cast<double>(s.dK + s.dV);
  return s.masks.has(MaskKind::Causal) ? flops / 2 : flops;
}

ParallelFor threadedFor(int32_t threads) {
  return [threads](int64_t count, const std::function<void(int64_t)>& body) {
    forEachOnThreads(threads, count, [&](int64_t index, int64_t) { body(index); });
  };
}

int32_t threadsOrAll(int32_t threads) {
  return threads > 0 ? threads
                     : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
}

Spec bundleSpec(const runtime::Bundle& bundle) {
  return manifestSpec(nlohmann::json::parse(bundle.manifest()));
}

} // namespace attnc::tools
