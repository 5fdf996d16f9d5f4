#include "Tuner.h"

#include "ChildProcess.h"
#include "Driver/Driver.h"
#include "Interrupts.h"
#include "Tuning/Hardware.h"
#include "attnc/CudaDriver.hpp"

#include <cmath>
#include <fmt/core.h>
#include <fstream>
#include <limits>
#include <map>
#include <thread>
#include <unistd.h>

namespace attnc::tools {
namespace {

using tuning::Candidate;
using tuning::TrialRecord;
using tuning::TrialStatus;

constexpr double kFailed = std::numeric_limits<double>::infinity();

// The shape every candidate is verified on before it is timed: odd sizes that no tile divides,
// Tq != Tk, batch 2.
constexpr const char* kVerifyBatch = "2";
constexpr const char* kVerifySeqQ = "37";
constexpr const char* kVerifySeqK = "53";

// Events as JSON lines (to stdout when it is not a terminal, and to --events), and a progress
// line on stderr when it is a terminal.
class Progress {
public:
  Progress(const std::filesystem::path& events, int budget)
      : jsonOut_(!isatty(STDOUT_FILENO)), terminal_(isatty(STDERR_FILENO)), budget_(budget) {
    if (!events.empty()) {
      file_.open(events, std::ios::app);
      if (!file_)
        throw UsageError("--events " + events.string() + ": cannot write it");
    }
  }

  void event(const nlohmann::json& e) {
    const std::string line = e.dump();
    if (jsonOut_)
      fmt::print("{}\n", line);
    if (file_.is_open())
      file_ << line << "\n" << std::flush;
    std::fflush(stdout);
  }

  void show(int done, double bestMs, const std::string& best, double secondsPerTrial, int left) {
    if (!terminal_)
      return;
    const int eta = static_cast<int>(secondsPerTrial * left);
    fmt::print(stderr, "\r\033[K[{:>3}/{}] best {} ({}) ETA {}m{:02}s", done, budget_,
               std::isfinite(bestMs) ? fmt::format("{:.3f} ms", bestMs) : "none yet", best,
               eta / 60, eta % 60);
  }

  void endLine() {
    if (terminal_)
      fmt::print(stderr, "\n");
  }

  bool jsonOut() const { return jsonOut_; }

private:
  bool jsonOut_, terminal_;
  int budget_;
  std::ofstream file_;
};

// A trial's bundle and the children's output, removed however the trial ends.
struct ScratchDirectory {
  ScratchDirectory() {
    // mkdtemp's template: it replaces the trailing XXXXXX with a unique suffix.
    std::string name = (std::filesystem::temp_directory_path() / "attnc-trial-XXXXXX").string();
    if (!mkdtemp(name.data()))
      throw JobError("cannot create a scratch directory in " +
                     std::filesystem::temp_directory_path().string());
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

// Compile, verify and time one candidate, each step a child process with a time limit.
TrialRecord measure(const Candidate& c, const Spec& spec, const TuneOptions& o,
                    const tuning::TuningKey& key, const std::string& toolchain,
                    std::optional<ChildResult>& interrupted) {
  TrialRecord r;
  r.uid = tuning::newUid();
  r.key = key;
  r.backend = c.backend;
  r.toolchain = toolchain;
  r.params = c.values;
  r.batch = o.batch;
  r.seqQ = o.seqQ;
  r.seqK = o.seqK;
  r.threads = o.threads;
  r.seed = o.seed;
  r.shard = o.shard.text();
  r.createdAt = tuning::utcNow();

  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const ScratchDirectory scratchDirectory;
  const std::filesystem::path& scratch = scratchDirectory.path;
  const std::string threads = std::to_string(o.threads);
  auto finish = [&](TrialStatus status, const ChildResult& step, const std::string& what) {
    r.status = status;
    r.detail = what + ": " + step.summary();
    r.seconds += step.seconds;
    if (step.interrupted)
      interrupted = step;
    return r;
  };

  ChildResult compiled =
      runChild({self, "compile", spec.canonical(), "--backend", c.backend, "--target", o.target,
                "--schedule", scheduleFlag(c), "--no-tuning", "-o", (scratch / "bundle").string()},
               o.compileLimit, scratch);
  if (!compiled.ok())
    return finish(statusOf(compiled, compiled.exitCode == 2 ? TrialStatus::Invalid
                                                            : TrialStatus::CompileError),
                  compiled, "compile");
  r.seconds += compiled.seconds;
  std::string bundle = compiled.out.substr(0, compiled.out.find('\n'));

  ChildResult verified = runChild({self, "verify", bundle, "--batch", kVerifyBatch, "--seq-q",
                                   kVerifySeqQ, "--seq-k", kVerifySeqK, "--threads", threads},
                                  o.runLimit, scratch);
  if (!verified.ok())
    return finish(
        statusOf(verified, verified.exitCode == 1 && verified.out.find("FAIL") != std::string::npos
                               ? TrialStatus::Wrong
                               : TrialStatus::Failed),
        verified, "verify");
  r.seconds += verified.seconds;

  ChildResult timed =
      runChild({self, "bench", bundle, "--json", "--no-baseline", "--flush-caches", "--warmup",
                std::to_string(o.warmup), "--runs", std::to_string(o.runs), "--batch",
                std::to_string(o.batch), "--seq-q", std::to_string(o.seqQ), "--seq-k",
                std::to_string(o.seqK), "--threads", threads},
               o.runLimit, scratch);
  if (!timed.ok())
    return finish(statusOf(timed, TrialStatus::Failed), timed, "bench");
  try {
    const nlohmann::json report = nlohmann::json::parse(timed.out);
    const nlohmann::json& kernel = report.at("timings").at("kernel");
    r.medianMs = kernel.at("median_ms").get<double>();
    r.p10Ms = kernel.at("p10_ms").get<double>();
    r.p90Ms = kernel.at("p90_ms").get<double>();
    r.runs = o.runs;
    r.threads = report.at("threads").get<int>();
    r.detail = fmt::format("verified at B={} Tq={} Tk={}; {:.1f} GFLOP/s", kVerifyBatch,
                           kVerifySeqQ, kVerifySeqK, kernel.at("gflops").get<double>());
  } catch (const std::exception& e) {
    return finish(TrialStatus::Failed, timed,
                  std::string("bench output unreadable (") + e.what() + ")");
  }
  r.status = TrialStatus::Ok;
  r.seconds += timed.seconds;
  return r;
}

} // namespace

std::string hardwareFor(const std::string& target) {
  if (target.rfind("cuda", 0) != 0)
    return tuning::cpuFingerprint();
  cuda::Device device;
  std::string why;
  if (!cuda::useDevice(&device, &why))
    throw JobError("tuning for --target " + target +
                   " measures on an NVIDIA GPU, and there is "
                   "none here: " +
                   why);
  return fmt::format("gpu: {}, sm_{}{}, driver {}", device.name, device.major, device.minor,
                     device.driverVersion);
}

tuning::TuningKey tuningKey(const Spec& spec, const TuneOptions& o) {
  return {spec.hash(), spec.canonical(),      tuning::ShapeBucket::of(o.seqQ, o.seqK),
          o.target,    hardwareFor(o.target), ATTNC_VERSION};
}

int tune(const Spec& spec, const TuneOptions& o, tuning::TuningDatabase& db) {
  std::vector<TuningSpace> spaces;
  for (TuningSpace& s : tuningSpaces(spec, o.target))
    if (o.backends.empty() || o.backends.count(s.backend)) {
      if (!o.autoschedulers)
        s.generated.clear();
      spaces.push_back(std::move(s));
    }
  if (spaces.empty())
    throw UsageError("--backend: none of the chosen backends can be tuned in this attnc");
  std::map<std::string, std::string> toolchainOf;
  for (const TuningSpace& s : spaces)
    toolchainOf[s.backend] = s.toolchain;

  const tuning::TuningKey key = tuningKey(spec, o);
  // Earlier trials of the same key and toolchain, by candidate: a resumed run reuses them.
  std::map<std::string, TrialRecord> earlier;
  for (TrialRecord& r : db.trials(key))
    if (toolchainOf.count(r.backend) && toolchainOf[r.backend] == r.toolchain)
      earlier.insert_or_assign(r.candidate(), std::move(r));

  Progress progress(o.events, o.trials);
  progress.event({{"event", "start"},
                  {"spec", key.spec},
                  {"target", o.target},
                  {"hardware", key.hardware},
                  {"bucket", key.bucket.text()},
                  {"database", db.path().string()},
                  {"trials", o.trials},
                  {"earlier_trials", earlier.size()},
                  {"seed", o.seed},
                  {"strategy", o.strategy == tuning::Strategy::Random ? "random" : "evolution"},
                  {"shard", o.shard.text()}});

  std::map<std::string, double> results;
  std::string best, defaultName;
  double bestMs = kFailed, defaultMs = kFailed;
  int fresh = 0;
  double freshSeconds = 0;
  std::string stopped = "trials";
  const auto start = std::chrono::steady_clock::now();
  auto outOfTime = [&] {
    return o.minutes > 0 &&
           std::chrono::steady_clock::now() - start > std::chrono::duration<double>(o.minutes * 60);
  };

  // A claim outlives no trial: a compile, a verify and a bench, each within its limit.
  const auto staleClaim = o.compileLimit + 2 * o.runLimit + std::chrono::seconds(60);
  // The record another tune on this database made of candidate `name` since this one started.
  auto recordedElsewhere = [&](const std::string& name, const std::string& toolchain) {
    std::optional<TrialRecord> found;
    for (TrialRecord& r : db.trials(key))
      if (r.candidate() == name && r.toolchain == toolchain)
        found = std::move(r);
    return found;
  };

  // One trial: reused from the database when this candidate was measured before, else
  // measured now and recorded at once. While another tune on the same database measures it,
  // this one waits for that record instead of measuring it again. nullopt when the run was
  // interrupted.
  auto trial = [&](const Candidate& c) -> std::optional<TrialRecord> {
    const std::string name = c.name();
    const std::string& toolchain = toolchainOf.at(c.backend);
    const std::string item = key.specHash + " " + key.bucket.text() + " " + key.target + " " +
                             key.hardware + " " + key.attncVersion + " " + toolchain + " " + name;
    std::optional<TrialRecord> found;
    if (auto it = earlier.find(name); it != earlier.end())
      found = it->second;
    bool announced = false;
    while (!found && !db.claim(item, staleClaim)) {
      if (!announced)
        progress.event({{"event", "waiting"},
                        {"candidate", name},
                        {"why", "another tune on this database is measuring it"}});
      announced = true;
      if (interruptSignal() != 0)
        return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      found = recordedElsewhere(name, toolchain);
    }
    // Claimed: another tune may still have recorded it since this one last looked.
    if (!found && (found = recordedElsewhere(name, toolchain)))
      db.release(item);
    const bool reused = found.has_value();
    TrialRecord record;
    if (reused) {
      record = std::move(*found);
    } else {
      std::optional<ChildResult> interrupted;
      record = measure(c, spec, o, key, toolchain, interrupted);
      if (interrupted) {
        db.release(item);
        return std::nullopt;
      }
      db.insert(record);
      db.release(item);
      ++fresh;
      freshSeconds += record.seconds;
    }
    const double ms = record.status == TrialStatus::Ok ? record.medianMs : kFailed;
    results[name] = ms;
    if (ms < bestMs) {
      bestMs = ms;
      best = name;
    }
    auto orNull = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
    progress.event({{"event", "trial"},
                    {"n", results.size()},
                    {"candidate", name},
                    {"status", tuning::statusName(record.status)},
                    {"median_ms", orNull(ms)},
                    {"detail", record.detail},
                    {"reused", reused},
                    {"best_ms", orNull(bestMs)},
                    {"best", best}});
    const int left = std::max(0, o.trials - static_cast<int>(results.size()));
    progress.show(static_cast<int>(results.size()), bestMs, best,
                  fresh ? freshSeconds / fresh : 0.0, left);
    return record;
  };

  // Each backend's default first; a backend whose default does not compile for this spec
  // (a variant it lacks, say) leaves the search.
  std::vector<TuningSpace> searched;
  for (const TuningSpace& s : spaces) {
    const Candidate c = Candidate::defaultOf(s);
    std::optional<TrialRecord> record = trial(c);
    if (!record) {
      stopped = "interrupted";
      break;
    }
    if (results[c.name()] < defaultMs) {
      defaultMs = results[c.name()];
      defaultName = c.name();
    }
    if (record->status == TrialStatus::Invalid || record->status == TrialStatus::CompileError)
      progress.event(
          {{"event", "backend_left_out"},
           {"backend", s.backend},
           {"why", "its default schedule does not compile for this spec: " + record->detail}});
    else
      searched.push_back(s);
  }

  if (stopped != "interrupted" && !searched.empty()) {
    tuning::Search search(searched, o.seed, o.shard, std::max(4, o.trials / 4), o.strategy);
    while (true) {
      if (static_cast<int>(results.size()) >= o.trials) {
        stopped = "trials";
        break;
      }
      if (outOfTime()) {
        stopped = "time";
        break;
      }
      std::optional<Candidate> c = search.next(results);
      if (!c) {
        stopped = "exhausted";
        break;
      }
      if (!trial(*c)) {
        stopped = "interrupted";
        break;
      }
    }
  }
  progress.endLine();

  nlohmann::json done = {{"event", "done"},
                         {"stopped", stopped},
                         {"trials", results.size()},
                         {"new_trials", fresh},
                         {"database", db.path().string()}};
  if (std::isfinite(bestMs)) {
    done["best"] = best;
    done["best_ms"] = bestMs;
  }
  if (std::isfinite(defaultMs)) {
    done["default"] = defaultName;
    done["default_ms"] = defaultMs;
    done["speedup_over_default"] = defaultMs / bestMs;
  }
  progress.event(done);
  if (!progress.jsonOut()) {
    fmt::print("tuned {} on {} ({}): {} trials ({} new), stopped by {}\n", key.spec, o.target,
               key.bucket.text(), results.size(), fresh, stopped);
    if (std::isfinite(bestMs))
      fmt::print("  best     {:9.3f} ms  {}\n", bestMs, best);
    if (std::isfinite(defaultMs))
      fmt::print("  default  {:9.3f} ms  {}  (best is {:.2f}x faster)\n", defaultMs, defaultName,
                 defaultMs / bestMs);
    fmt::print("  database {}\n", db.path().string());
  }
  // Interrupted: the shell's convention for a process ended by a signal, 128 + its number.
  if (stopped == "interrupted")
    return 128 + interruptSignal();
  // A run without one correct trial tuned nothing: the job failed, whatever stopped it.
  if (!std::isfinite(bestMs)) {
    fmt::print(stderr, "attnc: failed: none of the {} trials of {} compiled, verified and ran "
                       "correctly; each one's outcome is recorded in {}\n",
               results.size(), key.spec, db.path().string());
    return 1;
  }
  return 0;
}

} // namespace attnc::tools
