#include "Tuning/ChildProcessMeasurement.h"

#include "Support/Errors.h"
#include "Support/Files.h"

#include <cerrno>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace attnc::tuning {
namespace {

// The shape every candidate is verified on before it is timed: odd sizes that no tile divides,
// Tq != Tk, batch 2.
constexpr const char* kVerifyBatch = "2";
constexpr const char* kVerifySeqQ = "37";
constexpr const char* kVerifySeqK = "53";

// A trial's bundle and the children's output, removed however the trial ends.
struct ScratchDirectory {
  ScratchDirectory() {
    // mkdtemp's template: it replaces the trailing XXXXXX with a unique suffix.
    std::string name = (std::filesystem::temp_directory_path() / "attnc-trial-XXXXXX").string();
    if (!mkdtemp(name.data()))
      throwSystemError("cannot create a scratch directory in " +
                           std::filesystem::temp_directory_path().string(),
                       errno);
    path = name;
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  std::filesystem::path path;
};

std::string scheduleFlag(const Candidate& c) {
  std::string text;
  for (const auto& [name, value] : c.values)
    text += (text.empty() ? "" : ",") + name + "=" + std::to_string(value);
  return text;
}

TrialStatus statusOf(const ChildResult& r, TrialStatus onFailure) {
  if (r.timedOut)
    return TrialStatus::Timeout;
  if (r.signal)
    return TrialStatus::Crash;
  return onFailure;
}

// attnc bench's arguments for the timed shape; with `backward`, of the backward entry (its
// forward, whose o and lse it reads, run once untimed).
std::vector<std::string> benchArguments(const std::string& bundle, const TuneOptions& o,
                                        bool backward) {
  std::vector<std::string> arguments = {"bench", bundle, "--json", "--no-baseline",
                                        "--flush-caches"};
  for (auto [flag, value] : {std::pair{"--warmup", int64_t{o.warmup}},
                             {"--runs", o.runs},
                             {"--batch", o.batch},
                             {"--seq-q", o.seqQ},
                             {"--seq-k", o.seqK},
                             {"--threads", o.threads}}) {
    arguments.push_back(flag);
    arguments.push_back(std::to_string(value));
  }
  if (backward)
    arguments.push_back("--backward");
  return arguments;
}

// Adds the kernel's times in attnc bench's JSON report to m's; returns its rate as text, with
// the entry's name and median where the trial times two (`entry` not empty). Throws where the
// report lacks them.
std::string addTimings(Measured& m, const std::string& report, const std::string& entry) {
  const nlohmann::json json = nlohmann::json::parse(report);
  const nlohmann::json& kernel = json.at("timings").at("kernel");
  const double median = kernel.at("median_ms").get<double>();
  m.medianMs += median;
  m.p10Ms += kernel.at("p10_ms").get<double>();
  m.p90Ms += kernel.at("p90_ms").get<double>();
  m.threads = json.at("threads").get<int>();
  return fmt::format("{}{:.1f} GFLOP/s",
                     entry.empty() ? "" : fmt::format("{} {:.3f} ms, ", entry, median),
                     kernel.at("gflops").get<double>());
}

} // namespace

ChildProcessMeasurement::ChildProcessMeasurement(std::filesystem::path attnc, TuneOptions options,
                                                 StopRequest stop)
    : attnc_(std::move(attnc)), options_(std::move(options)), stop_(std::move(stop)) {}

Measured ChildProcessMeasurement::measure(const Spec& spec, const Candidate& c) {
  const TuneOptions& o = options_;
  Measured m;
  const ScratchDirectory scratchDirectory;
  const std::filesystem::path& scratch = scratchDirectory.path;
  const std::string threads = std::to_string(o.threads);
  // A step that failed for want of something on this machine (attnc exits
  // kEnvironmentExitCode) says nothing about the candidate: the trial is not recorded.
  auto run = [&](std::vector<std::string> arguments, std::chrono::seconds limit) {
    arguments.insert(arguments.begin(), attnc_.string());
    ChildResult result = runChild(arguments, limit, stop_);
    m.seconds += result.seconds;
    if (result.exitCode == kEnvironmentExitCode)
      throw EnvironmentError("attnc " + arguments[1] + " of " + c.name() + " failed on this " +
                             "machine, not for the candidate (" + result.summary() +
                             "); nothing was recorded of it");
    return result;
  };
  auto failed = [&](TrialStatus status, const ChildResult& step, const std::string& what) {
    m.status = status;
    m.detail = what + ": " + step.summary();
    m.interrupted = step.interrupted;
    return m;
  };

  const ChildResult compiled =
      run({"compile", spec.canonical(), "--backend", c.backend, "--target", o.target.name,
           "--schedule", scheduleFlag(c), "--no-tuning", "-o", (scratch / "bundle").string()},
          o.compileLimit);
  if (!compiled.ok())
    return failed(statusOf(compiled, compiled.exitCode == 2 ? TrialStatus::Invalid
                                                            : TrialStatus::CompileError),
                  compiled, "compile");
  const std::string bundle = compiled.out.substr(0, compiled.out.find('\n'));

  // A backward spec's trial verifies the gradients too and times a training step: the
  // forward's median and the backward's summed, and their p10s and p90s summed too (a guide to
  // the step's spread, not its percentiles).
  std::vector<std::string> verify = {"verify",    bundle,    "--batch",   kVerifyBatch, "--seq-q",
                                     kVerifySeqQ, "--seq-k", kVerifySeqK, "--threads",  threads};
  if (spec.backward)
    verify.push_back("--backward");
  const ChildResult verified = run(verify, o.runLimit);
  if (!verified.ok())
    return failed(
        statusOf(verified, verified.exitCode == 1 && verified.out.find("FAIL") != std::string::npos
                               ? TrialStatus::Wrong
                               : TrialStatus::Failed),
        verified, "verify");

  // The forward, then a backward spec's backward entry; a trial's times are their sums.
  std::vector<bool> entries = {false};
  if (spec.backward)
    entries.push_back(true);
  std::string timings;
  for (const bool backward : entries) {
    const ChildResult timed = run(benchArguments(bundle, o, backward), o.runLimit);
    if (!timed.ok())
      return failed(statusOf(timed, TrialStatus::Failed), timed, "bench");
    try {
      const std::string entry = !spec.backward ? "" : backward ? "backward" : "forward";
      timings += (timings.empty() ? "" : "; ") + addTimings(m, timed.out, entry);
    } catch (const std::exception& e) {
      return failed(TrialStatus::Failed, timed,
                    std::string("bench output unreadable (") + e.what() + ")");
    }
  }
  m.runs = o.runs;
  m.detail =
      fmt::format("verified{} at B={} Tq={} Tk={}; {}", spec.backward ? " with its gradients" : "",
                  kVerifyBatch, kVerifySeqQ, kVerifySeqK, timings);
  m.status = TrialStatus::Ok;
  return m;
}

} // namespace attnc::tuning
