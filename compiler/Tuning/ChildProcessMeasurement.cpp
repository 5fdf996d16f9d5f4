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

  const ChildResult verified = run({"verify", bundle, "--batch", kVerifyBatch, "--seq-q",
                                    kVerifySeqQ, "--seq-k", kVerifySeqK, "--threads", threads},
                                   o.runLimit);
  if (!verified.ok())
    return failed(
        statusOf(verified, verified.exitCode == 1 && verified.out.find("FAIL") != std::string::npos
                               ? TrialStatus::Wrong
                               : TrialStatus::Failed),
        verified, "verify");

  const ChildResult timed =
      run({"bench", bundle, "--json", "--no-baseline", "--flush-caches", "--warmup",
           std::to_string(o.warmup), "--runs", std::to_string(o.runs), "--batch",
           std::to_string(o.batch), "--seq-q", std::to_string(o.seqQ), "--seq-k",
           std::to_string(o.seqK), "--threads", threads},
          o.runLimit);
  if (!timed.ok())
    return failed(statusOf(timed, TrialStatus::Failed), timed, "bench");
  try {
    const nlohmann::json report = nlohmann::json::parse(timed.out);
    const nlohmann::json& kernel = report.at("timings").at("kernel");
    m.medianMs = kernel.at("median_ms").get<double>();
    m.p10Ms = kernel.at("p10_ms").get<double>();
    m.p90Ms = kernel.at("p90_ms").get<double>();
    m.runs = o.runs;
    m.threads = report.at("threads").get<int>();
    m.detail = fmt::format("verified at B={} Tq={} Tk={}; {:.1f} GFLOP/s", kVerifyBatch,
                           kVerifySeqQ, kVerifySeqK, kernel.at("gflops").get<double>());
  } catch (const std::exception& e) {
    return failed(TrialStatus::Failed, timed,
                  std::string("bench output unreadable (") + e.what() + ")");
  }
  m.status = TrialStatus::Ok;
  return m;
}

} // namespace attnc::tuning
