// attnc tune: searches the schedules of every backend for a spec on this machine and records
// each trial in the tuning database; --merge, --export and --import move records between
// databases and machines.
#include "Commands.h"
#include "Driver/Driver.h"
#include "Interrupts.h"
#include "OutputFile.h"
#include "Support/Files.h"
#include "TuneReport.h"
#include "Tuning/ChildProcessMeasurement.h"
#include "Tuning/Tuner.h"

#include <cerrno>
#include <cmath>
#include <fcntl.h>
#include <fmt/core.h>
#include <fstream>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace attnc::tools {
namespace {

using tuning::TuneOptions;

// The run's events as JSON lines (to stdout when it is not a terminal, and to --events), and a
// progress line on stderr when it is a terminal. The --events file is opened by the first event:
// a run refused before it starts leaves none.
class TuneProgress : public tuning::TuneObserver {
public:
  explicit TuneProgress(std::filesystem::path events)
      : jsonOut_(!isatty(STDOUT_FILENO)), terminal_(isatty(STDERR_FILENO)),
        events_(std::move(events)) {}
  ~TuneProgress() override {
    if (file_ >= 0)
      ::close(file_);
  }
  TuneProgress(const TuneProgress&) = delete;
  TuneProgress& operator=(const TuneProgress&) = delete;

  void event(const nlohmann::json& e) override {
    if (!events_.empty() && file_ < 0) {
      file_ = ::open(events_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
      if (file_ < 0)
        throwSystemError<UsageError>("--events " + events_.string() + ": cannot write it", errno);
    }
    const std::string line = e.dump();
    if (jsonOut_)
      fmt::print("{}\n", line);
    // Every event is written whole, or the run stops: a full disk must not drop them unseen.
    if (file_ >= 0)
      if (const int failure = writeAll(file_, line + "\n"))
        throwSystemError("--events " + events_.string() + ": cannot write it", failure);
    std::fflush(stdout);
  }

  void progress(int done, int budget, double bestMs, const std::string& best,
                double secondsLeft) override {
    if (!terminal_)
      return;
    const int eta = static_cast<int>(secondsLeft);
    fmt::print(stderr, "\r\033[K[{:>3}/{}] best {} ({}) ETA {}m{:02}s", done, budget,
               std::isfinite(bestMs) ? fmt::format("{:.3f} ms", bestMs) : "none yet", best,
               eta / 60, eta % 60);
  }

  // Ends the progress line, then on a terminal the summary of `outcome`.
  void finish(const tuning::TuneOutcome& outcome, const std::filesystem::path& db) {
    const tuning::TuningKey& key = outcome.key;
    if (terminal_)
      fmt::print(stderr, "\n");
    if (jsonOut_)
      return;
    fmt::print("tuned {} on {} ({}): {} trials ({} new), stopped by {}\n", key.spec, key.target,
               key.bucket.text(), outcome.trials, outcome.freshTrials, outcome.stopped);
    if (std::isfinite(outcome.bestMs))
      fmt::print("  best     {:9.3f} ms  {}\n", outcome.bestMs, outcome.best);
    if (std::isfinite(outcome.defaultMs))
      fmt::print("  default  {:9.3f} ms  {}  (best is {:.2f}x faster)\n", outcome.defaultMs,
                 outcome.defaultName, outcome.defaultMs / outcome.bestMs);
    fmt::print("  database {}\n", db.string());
  }

private:
  bool jsonOut_, terminal_;
  std::filesystem::path events_;
  int file_ = -1; // the --events file, opened by the first event
};

// Tunes `spec`, measuring each candidate with this attnc in child processes; the exit code.
int runTuning(const Spec& spec, const TuneOptions& options, tuning::TuningDatabase& db,
              const std::filesystem::path& events) {
  deferInterrupts();
  tuning::ChildProcessMeasurement measurement(std::filesystem::read_symlink("/proc/self/exe"),
                                              options, {interruptSignal, interruptSignals()});
  TuneProgress progress(events);
  const tuning::TuneOutcome outcome = tuning::tune(spec, options, db, measurement, progress);
  progress.finish(outcome, db.path());
  // Interrupted: the shell's convention for a process ended by a signal, 128 + its number.
  if (outcome.stopped == "interrupted")
    return 128 + outcome.interruptSignal;
  // A run without one correct trial tuned nothing: the job failed, whatever stopped it.
  if (!std::isfinite(outcome.bestMs)) {
    fmt::print(stderr, "attnc: failed: none of the {} trials of {} compiled, verified and ran "
                       "correctly; each one's outcome is recorded in {}\n",
               outcome.trials, spec.canonical(), db.path().string());
    return 1;
  }
  return 0;
}

struct TuneCommandOptions {
  std::string spec, db, shard, exportTo, importFrom, events, report, strategy = "evolution";
  std::string target = "host";
  std::vector<std::string> merge, backends;
  int compileLimit = 300, runLimit = 120;
  TuneOptions tune;
};

// Folds every trial of `from` into `into`; trials already there (same uid) stay as they are.
size_t mergeInto(tuning::TuningDatabase& into, tuning::TuningDatabase& from) {
  size_t added = 0;
  for (const tuning::TrialRecord& r : from.all())
    added += into.insert(r) ? 1 : 0;
  return added;
}

size_t importJsonLines(tuning::TuningDatabase& db, const std::string& file) {
  std::ifstream in(file);
  if (!in)
    throw UsageError("--import " + file + ": cannot read it");
  size_t added = 0, lineNumber = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNumber;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    tuning::TrialRecord record;
    try {
      record = tuning::TrialRecord::fromJson(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      throw UsageError(fmt::format("--import {}: line {} is not a trial record ({}); nothing "
                                   "after line {} was imported",
                                   file, lineNumber, e.what(), lineNumber - 1));
    }
    added += db.insert(record) ? 1 : 0;
  }
  return added;
}

size_t exportJsonLines(tuning::TuningDatabase& db, const std::string& file) {
  const std::vector<tuning::TrialRecord> records = db.all();
  std::string lines;
  for (const tuning::TrialRecord& r : records)
    lines += r.toJson().dump() + "\n";
  writeFileAtomically(file, lines); // a failed export leaves no partial file
  return records.size();
}

} // namespace

Action addTuneCommand(CLI::App& app) {
  auto o = std::make_shared<TuneCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Search the schedules of a spec on this machine and remember the fastest");
  cmd->add_option("spec", o->spec, "spec text 'key=value ...' or a .json file");
  cmd->add_option("--target", o->target, "what to tune for (host, x86-64-avx2, cuda-sm_90...)")
      ->capture_default_str();
  cmd->add_option("--backend", o->backends, "backends to search (default: all tunable)")
      ->delimiter(',')
      ->check(CLI::IsMember({"halide", "mlir"}));
  cmd->add_option("--trials", o->tune.trials,
                  "trials in all, counting those of earlier runs with the same spec, shape "
                  "bucket, target and machine")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--minutes", o->tune.minutes, "wall-time budget of this run (0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->tune.seed, "seed of the search")->capture_default_str();
  cmd->add_option("--strategy", o->strategy,
                  "evolution (random warm start, then mutations of the fastest), or random "
                  "(uniform draws only: the baseline evolution is measured against)")
      ->capture_default_str();
  cmd->add_flag("--autoschedulers", o->tune.autoschedulers,
                "also try Halide 14's autoschedulers (Adams2019, Li2018, Mullapudi2016) on the "
                "halide backend's algorithm; off by default: they compile slowly (Adams2019 can "
                "take minutes) and their kernels ran 5-50x slower than attnc's schedule here");
  cmd->add_option("--shard", o->shard, "run slice I of N of the search (I/N, e.g. 0/4)");
  cmd->add_option("--batch", o->tune.batch, "batch size timed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seq-q", o->tune.seqQ, "query length timed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seq-k", o->tune.seqK, "key length timed (default: --seq-q)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o->tune.threads, "threads (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--runs", o->tune.runs, "timed runs per candidate (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--compile-timeout", o->compileLimit, "seconds a compile may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--run-timeout", o->runLimit, "seconds a verify or bench may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--db", o->db,
                  "the database to write (default: $ATTNC_TUNING_DB, else "
                  "$XDG_CACHE_HOME/attnc/tuning.db)");
  cmd->add_option("--events", o->events, "also append the JSON-lines events to this file");
  cmd->add_option("--merge", o->merge, "fold these databases' trials into --db")->expected(1, -1);
  cmd->add_option("--export", o->exportTo, "write every trial of --db to this .jsonl file");
  cmd->add_option("--import", o->importFrom, "add the trials of this .jsonl file to --db");
  cmd->add_option("--report", o->report,
                  "instead of tuning, print tables of the trials of this spec, shape bucket "
                  "(--seq-q/--seq-k) and target on this machine, and plot them into this .svg");
  return [o] {
    const std::filesystem::path dbPath =
        o->db.empty() ? tuning::userDatabasePath() : std::filesystem::path(o->db);
    const int maintenance = !o->merge.empty() + !o->exportTo.empty() + !o->importFrom.empty();
    if (maintenance > 1 || (maintenance == 1 && !o->spec.empty()) ||
        (maintenance == 1 && !o->report.empty()))
      throw UsageError("give a spec to tune or --report, or one of --merge, --export, --import");
    if (maintenance == 0 && o->spec.empty())
      throw UsageError("a spec to tune is required (or --merge, --export, --import)");
    TuneOptions options = o->tune;
    if (maintenance == 0) // tuning or --report: --merge, --export and --import take no target
      options.target = parseTarget(o->target);
    if (options.seqK == 0)
      options.seqK = options.seqQ;

    if (!o->report.empty()) {
      if (std::filesystem::path(o->report).extension() != ".svg")
        throw UsageError("--report " + o->report + ": the plot is SVG; give a file ending in .svg");
      const Spec spec = loadSpec(o->spec);
      tuning::TuningDatabase db(dbPath, tuning::TuningDatabase::Mode::ReadOnly);
      writeTuneReport(db.trials(tuning::tuningKey(spec, options)),
                      tuningSpaces(spec, options.target), std::cout, o->report);
      return 0;
    }

    if (!o->exportTo.empty()) {
      tuning::TuningDatabase db(dbPath, tuning::TuningDatabase::Mode::ReadOnly);
      size_t n = exportJsonLines(db, o->exportTo);
      fmt::print("exported {} trials from {} to {}\n", n, dbPath.string(), o->exportTo);
      return 0;
    }
    tuning::TuningDatabase db(dbPath, tuning::TuningDatabase::Mode::ReadWrite);
    if (!o->importFrom.empty()) {
      size_t n = importJsonLines(db, o->importFrom);
      fmt::print("imported {} new trials from {} into {}\n", n, o->importFrom, dbPath.string());
      return 0;
    }
    if (!o->merge.empty()) {
      // Every source is checked before any is folded in: a damaged one stops the merge early.
      std::vector<std::unique_ptr<tuning::TuningDatabase>> sources;
      for (const std::string& source : o->merge)
        sources.push_back(std::make_unique<tuning::TuningDatabase>(
            source, tuning::TuningDatabase::Mode::ReadOnly));
      for (auto& source : sources) {
        size_t n = mergeInto(db, *source);
        fmt::print("merged {} new trials from {} into {}\n", n, source->path().string(),
                   dbPath.string());
      }
      return 0;
    }

    options.strategy = tuning::parseStrategy(o->strategy);
    options.backends = {o->backends.begin(), o->backends.end()};
    if (!o->shard.empty())
      options.shard = tuning::Shard::parse(o->shard);
    options.compileLimit = std::chrono::seconds(o->compileLimit);
    options.runLimit = std::chrono::seconds(o->runLimit);
    return runTuning(loadSpec(o->spec), options, db, o->events);
  };
}

} // namespace attnc::tools
