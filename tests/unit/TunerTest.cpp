// The tuning loop with a made-up measurement: the order of trials, the budget, reuse of
// recorded trials, interruption, and backends whose default does not compile.
#include "Driver/Driver.h"
#include "Spec/Spec.h"
#include "Support/Errors.h"
#include "TestSupport.h"
#include "Tuning/BuildIdentity.h"
#include "Tuning/Tuner.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <gtest/gtest.h>

namespace attnc {
namespace {

using tuning::Candidate;
using tuning::Measured;
using tuning::TrialStatus;

// Times every candidate by a fixed function of its name, unless told otherwise.
class FakeMeasurement : public tuning::Measurement {
public:
  Measured measure(const Spec&, const Candidate& c) override {
    measured.push_back(c.name());
    Measured m;
    if (machineFailsAfter && measured.size() > *machineFailsAfter)
      throw EnvironmentError("compile: exit 75: No space left on device");
    if (stopAfter && measured.size() > *stopAfter) {
      signal = 15;
      m.interrupted = true;
      return m;
    }
    if (refused.count(c.backend)) {
      m.status = TrialStatus::Invalid;
      m.detail = "compile: exit 2: refused";
      return m;
    }
    m.status = TrialStatus::Ok;
    m.medianMs = 1 + static_cast<double>(std::hash<std::string>()(c.name()) % 1000) / 100;
    m.p10Ms = m.p90Ms = m.medianMs;
    m.runs = 7;
    m.threads = 2;
    m.seconds = 0.5;
    return m;
  }
  int stopSignal() const override { return signal; }

  std::vector<std::string> measured;       // every candidate measured, in order
  std::optional<size_t> stopAfter;         // the run is interrupted during the measure after these
  std::optional<size_t> machineFailsAfter; // the disk fills up during the measure after these
  std::set<std::string> refused;           // backends whose every candidate fails to compile
  int signal = 0;
};

class Events : public tuning::TuneObserver {
public:
  void event(const nlohmann::json& e) override { names.push_back(e.at("event")); }
  void progress(int done, int budget, double, const std::string&, double) override {
    EXPECT_LE(done, budget);
  }
  std::vector<std::string> names;
};

class Tuner : public ::testing::Test {
protected:
  void SetUp() override {
    if (!ATTNC_HAS_HALIDE || !ATTNC_HAS_MLIR)
      GTEST_SKIP() << "attnc was built without the halide and mlir backends to tune";
  }
  static tuning::TuneOptions options(int trials) {
    tuning::TuneOptions o;
    o.trials = trials;
    o.seqQ = o.seqK = 256;
    return o;
  }
  tuning::TuneOutcome tune(int trials, FakeMeasurement& measurement) {
    tuning::TuningDatabase db(scratch_.path() / "tuning.db",
                              tuning::TuningDatabase::Mode::ReadWrite);
    return tuning::tune(spec_, options(trials), db, measurement, events_);
  }
  // Records `space`'s default as measured by `build`, with `status`.
  void record(const TuningSpace& space, const std::string& build, TrialStatus status) {
    tuning::TrialRecord r;
    r.uid = tuning::newUid();
    r.key = tuning::tuningKey(spec_, options(0));
    r.backend = space.backend;
    r.toolchain = space.toolchain;
    r.params = Candidate::defaultOf(space).values;
    r.status = status;
    r.medianMs = r.p10Ms = r.p90Ms = 1;
    r.createdAt = tuning::utcNow();
    r.build = build;
    tuning::TuningDatabase db(scratch_.path() / "tuning.db",
                              tuning::TuningDatabase::Mode::ReadWrite);
    ASSERT_TRUE(db.insert(r));
  }
  size_t recorded() {
    tuning::TuningDatabase db(scratch_.path() / "tuning.db",
                              tuning::TuningDatabase::Mode::ReadOnly);
    return db.all().size();
  }

  test::ScratchDir scratch_{"tuner"};
  const Spec spec_ = parseSpec("heads=2 d_k=32");
  Events events_;
};

TEST_F(Tuner, MeasuresEachDefaultFirstAndStopsAtTheBudget) {
  FakeMeasurement measurement;
  const tuning::TuneOutcome outcome = tune(9, measurement);
  EXPECT_EQ(outcome.stopped, "trials");
  EXPECT_EQ(outcome.trials, 9);
  EXPECT_EQ(outcome.freshTrials, 9);
  ASSERT_EQ(measurement.measured.size(), 9u);
  std::set<std::string> defaults;
  for (const TuningSpace& s : tuningSpaces(spec_, parseTarget("host")))
    defaults.insert(Candidate::defaultOf(s).name());
  EXPECT_EQ(std::set<std::string>(measurement.measured.begin(),
                                  measurement.measured.begin() + defaults.size()),
            defaults);
  EXPECT_EQ(recorded(), 9u);
  EXPECT_LE(outcome.bestMs, outcome.defaultMs);
  EXPECT_EQ(events_.names.front(), "start");
  EXPECT_EQ(events_.names.back(), "done");
}

TEST_F(Tuner, AResumedRunReusesTheRecordedTrials) {
  FakeMeasurement first, second;
  tune(6, first);
  const tuning::TuneOutcome outcome = tune(10, second);
  EXPECT_EQ(outcome.trials, 10);
  EXPECT_EQ(outcome.freshTrials, 4);
  EXPECT_EQ(second.measured.size(), 4u);
  for (const std::string& name : second.measured)
    EXPECT_EQ(std::count(first.measured.begin(), first.measured.end(), name), 0) << name;
  EXPECT_EQ(recorded(), 10u);
}

TEST_F(Tuner, AnInterruptedTrialIsNotRecorded) {
  FakeMeasurement measurement;
  measurement.stopAfter = 3;
  const tuning::TuneOutcome outcome = tune(10, measurement);
  EXPECT_EQ(outcome.stopped, "interrupted");
  EXPECT_EQ(outcome.interruptSignal, 15);
  EXPECT_EQ(outcome.trials, 3);
  EXPECT_EQ(recorded(), 3u);
}

// Once: a full disk's failures were recorded as the candidates' ("crash"), and a rerun with
// room reused them.
TEST_F(Tuner, ATrialTheMachineFailedIsNotRecorded) {
  FakeMeasurement full;
  full.machineFailsAfter = 3;
  EXPECT_THROW(tune(10, full), EnvironmentError);
  EXPECT_EQ(recorded(), 3u);
  // The next run, with room, measures that trial first (tests/cli/test_faults.py checks that
  // its claim was released too).
  FakeMeasurement mended;
  const tuning::TuneOutcome outcome = tune(10, mended);
  EXPECT_EQ(outcome.freshTrials, 7);
  EXPECT_EQ(mended.measured.front(), full.measured.back());
}

// Once: a failed trial was reused by every later build of the same version, so a candidate that
// crashed on a bug fixed since was never measured again. Its times are reused across builds.
TEST_F(Tuner, AFailureAnotherBuildRecordedIsMeasuredAgain) {
  EXPECT_EQ(tuning::attncBuild().size(), 16u); // the linker's build IDs, hashed
  const std::vector<TuningSpace> spaces = tuningSpaces(spec_, parseTarget("host"));
  ASSERT_GE(spaces.size(), 2u);
  record(spaces[0], "0123456789abcdef", TrialStatus::Crash);
  record(spaces[1], "0123456789abcdef", TrialStatus::Ok);
  FakeMeasurement fixed;
  tune(static_cast<int>(spaces.size()), fixed);
  EXPECT_EQ(fixed.measured, std::vector<std::string>{Candidate::defaultOf(spaces[0]).name()});
}

TEST_F(Tuner, AFailureThisBuildRecordedIsReused) {
  const std::vector<TuningSpace> spaces = tuningSpaces(spec_, parseTarget("host"));
  ASSERT_GE(spaces.size(), 2u);
  record(spaces[0], tuning::attncBuild(), TrialStatus::Crash);
  FakeMeasurement measurement;
  tune(static_cast<int>(spaces.size()), measurement);
  EXPECT_EQ(std::count(measurement.measured.begin(), measurement.measured.end(),
                       Candidate::defaultOf(spaces[0]).name()),
            0);
}

TEST_F(Tuner, ABackendWhoseDefaultDoesNotCompileLeavesTheSearch) {
  FakeMeasurement measurement;
  measurement.refused = {"halide"};
  const tuning::TuneOutcome outcome = tune(8, measurement);
  EXPECT_EQ(outcome.trials, 8);
  EXPECT_NE(std::find(events_.names.begin(), events_.names.end(), "backend_left_out"),
            events_.names.end());
  EXPECT_EQ(std::count_if(measurement.measured.begin(), measurement.measured.end(),
                          [](const std::string& name) { return name.rfind("halide", 0) == 0; }),
            1);
  EXPECT_EQ(outcome.best.rfind("mlir", 0), 0u);
}

TEST_F(Tuner, NoRunWithoutATunableBackend) {
  FakeMeasurement measurement;
  tuning::TuningDatabase db(scratch_.path() / "tuning.db", tuning::TuningDatabase::Mode::ReadWrite);
  tuning::TuneOptions options;
  options.backends = {"reference"};
  EXPECT_THROW(tuning::tune(spec_, options, db, measurement, events_), UsageError);
  EXPECT_TRUE(measurement.measured.empty());
}

// A backward spec's trials time the forward and the backward: they are keyed apart from the
// spec's hash, under which attnc tune recorded trials of its forward alone before.
TEST(TrialsHash, ABackwardSpecsTrialsAreKeyedByWhatTheyTime) {
  const Spec forward = parseSpec("heads=2 d_k=32 lse=true");
  const Spec backward = parseSpec("heads=2 d_k=32 lse=true backward=true");
  EXPECT_EQ(tuning::trialsHash(forward), forward.hash());
  EXPECT_NE(tuning::trialsHash(backward), backward.hash());
  EXPECT_EQ(tuning::trialsHash(backward).size(), backward.hash().size());
}

} // namespace
} // namespace attnc
