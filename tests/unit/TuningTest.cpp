// The tuner's search spaces and search, and the tuning database under damage and concurrency.
#include "Driver/Driver.h"
#include "TestSupport.h"
#include "Tuning/Search.h"
#include "Tuning/TuningDatabase.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <limits>
#include <set>
#include <sqlite3.h>
#include <thread>

namespace attnc {
namespace {

using tuning::Candidate;
using tuning::parseStrategy;
using tuning::Search;
using tuning::Shard;
using tuning::Strategy;

ScheduleParams paramsOf(const Candidate& c) {
  return ScheduleParams(c.backend, c.values, "test");
}

const TuningSpace& spaceOf(const std::vector<TuningSpace>& spaces, const std::string& backend) {
  for (const TuningSpace& s : spaces)
    if (s.backend == backend)
      return s;
  throw std::out_of_range(backend);
}

// The search spaces are the code generators' (halide and mlir): a build without them (the
// sanitizer build) has none to search, and says so.
class CodeGeneratorSpaces : public ::testing::Test {
protected:
  void SetUp() override {
    if (!ATTNC_HAS_HALIDE || !ATTNC_HAS_MLIR)
      GTEST_SKIP() << "attnc was built without the halide and mlir backends";
  }
};
class TuningSpaces : public CodeGeneratorSpaces {};
class TuningSearch : public CodeGeneratorSpaces {};

// Every target's spaces: the defaults pass their own check, and a search only ever proposes
// candidates that pass it, with values from the declared choices.
TEST_F(TuningSpaces, SearchProposesOnlyValidCandidates) {
  for (auto [specText, target] : {std::pair{"heads=4 d_k=64", "host"},
                                  {"heads=4 d_k=128 dtype=f16", "cuda-sm_90"},
                                  {"heads=4 d_k=256", "cuda-sm_80"}}) {
    Spec spec = parseSpec(specText);
    std::vector<TuningSpace> spaces = tuningSpaces(spec, parseTarget(target));
    ASSERT_FALSE(spaces.empty());
    for (const TuningSpace& s : spaces)
      EXPECT_NO_THROW(s.check(s.defaults)) << s.backend << " " << target;
    Search search(spaces, 7, Shard{}, 10);
    std::map<std::string, double> results;
    for (int i = 0; i < 60; ++i) {
      std::optional<Candidate> c = search.next(results);
      ASSERT_TRUE(c);
      const TuningSpace& space = spaceOf(spaces, c->backend);
      EXPECT_NO_THROW(space.check(paramsOf(*c))) << c->name();
      for (const ParamSpace& p : space.params) {
        int64_t v = c->values.at(std::string(p.name));
        EXPECT_NE(std::find(p.choices.begin(), p.choices.end(), v), p.choices.end()) << c->name();
      }
      EXPECT_FALSE(results.count(c->name())) << "proposed twice: " << c->name();
      results[c->name()] = i % 5 == 0 ? std::numeric_limits<double>::infinity() : 1.0 + i % 7;
    }
  }
}

// The space's check refuses `params` with a UsageError that says `reason`.
void expectRefused(const TuningSpace& space, const ScheduleParams& params,
                   const std::string& reason) {
  try {
    space.check(params);
    FAIL() << "accepted: " << reason;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST_F(TuningSpaces, ChecksNameTheClash) {
  Spec spec = parseSpec("heads=4 d_k=64");
  const TuningSpace halide = spaceOf(tuningSpaces(spec, parseTarget("host")), "halide");
  std::map<std::string, int64_t> values = halide.defaults.toJson()["params"];
  values["query_tile"] = 24;
  values["vector_width"] = 16;
  expectRefused(halide, ScheduleParams("halide", values, "test"),
                "query_tile=24 must be a multiple of vector_width=16");
  // On CUDA, the tensor-core family's K/V tiles must fit in shared memory.
  Spec half = parseSpec("heads=4 d_k=256 dtype=bf16");
  const TuningSpace mma = spaceOf(tuningSpaces(half, parseTarget("cuda-sm_90")), "mlir");
  EXPECT_EQ(mma.family, ScheduleFamily::CudaMma);
  std::map<std::string, int64_t> big = mma.defaults.toJson()["params"];
  big["key_block"] = 128;
  EXPECT_THROW(mma.check(ScheduleParams("mlir", big, "test")), UsageError);
}

// A variant's products take tensor cores (TF32) on the SIMT family for f16 and bf16 specs, as
// the dtype decides (not searched); an f32 spec keeps its products in f32 and refuses them.
// The attention itself takes the tensor-core family where the products can make its operands
// in f16 or bf16: mha's and Linformer's with head dims multiples of 16, bilinear's in f16.
TEST_F(TuningSpaces, VariantProductsOnTensorCoresFollowTheDtype) {
  auto cuda = [](const char* specText) {
    return spaceOf(tuningSpaces(parseSpec(specText), parseTarget("cuda-sm_80")), "mlir");
  };
  EXPECT_EQ(cuda("variant=mha heads=4 d_model=128 dtype=bf16").family, ScheduleFamily::CudaMma);
  EXPECT_EQ(cuda("variant=linformer heads=2 d_k=64 proj_len=32 dtype=bf16").family,
            ScheduleFamily::CudaMma);
  EXPECT_EQ(cuda("variant=bilinear heads=2 d_q=48 d_k=64 dtype=f16").family,
            ScheduleFamily::CudaMma);
  EXPECT_EQ(cuda("variant=bilinear heads=2 d_q=48 d_k=64 dtype=bf16").family, ScheduleFamily::Cuda);
  EXPECT_EQ(cuda("variant=additive heads=2 d_k=64 d_attn=32 dtype=f16").family,
            ScheduleFamily::Cuda);
  const TuningSpace half = cuda("variant=mha heads=4 d_model=96 dtype=bf16"); // d_k 24
  const TuningSpace single = cuda("variant=mha heads=4 d_model=128");
  EXPECT_EQ(half.family, ScheduleFamily::Cuda);
  EXPECT_EQ(half.defaults.get("matmul_mma"), 1);
  EXPECT_EQ(single.defaults.get("matmul_mma"), 0);
  for (const ParamSpace& p : half.params)
    EXPECT_NE(p.name, "matmul_mma");
  std::map<std::string, int64_t> values = single.defaults.toJson()["params"];
  values["matmul_mma"] = 1;
  expectRefused(single, ScheduleParams("mlir", values, "test"),
                "matmul_mma=1 takes the products in TF32");
}

// The backward's parameters are searched where the trials time the backward (backward=true),
// backward_dot where the family has pairs of bf16 to take: Zen 4's and Sapphire Rapids'.
TEST_F(TuningSpaces, TheBackwardsParametersOnlyForABackwardSpec) {
  auto names = [](const char* specText, const char* target) {
    std::set<std::string> found;
    const std::vector<TuningSpace> spaces = tuningSpaces(parseSpec(specText), parseTarget(target));
    for (const ParamSpace& p : spaceOf(spaces, "mlir").params)
      found.insert(std::string(p.name));
    return found;
  };
  const char* backward = "heads=4 d_k=64 dtype=bf16 lse=true backward=true";
  for (const char* target : {"x86-64-avx2", "x86-64-zen4", "x86-64-sapphirerapids"}) {
    EXPECT_FALSE(names("heads=4 d_k=64 dtype=bf16 lse=true", target).count("backward_key_block"))
        << target;
    EXPECT_TRUE(names(backward, target).count("backward_key_block")) << target;
    EXPECT_EQ(names(backward, target).count("backward_dot"),
              std::string(target) == "x86-64-avx2" ? 0u : 1u)
        << target;
  }
}

TEST_F(TuningSpaces, LinearAttentionSearchesOnlyItsChunk) {
  auto names = [](const char* specText) {
    std::set<std::string> found;
    const std::vector<TuningSpace> spaces =
        tuningSpaces(parseSpec(specText), parseTarget("host"));
    for (const ParamSpace& p : spaceOf(spaces, "halide").params)
      found.insert(std::string(p.name));
    return found;
  };
  EXPECT_EQ(names("variant=linear d_k=64 mask=causal"), std::set<std::string>{"chunk"});
  const std::set<std::string> softmax = names("heads=4 d_k=64");
  EXPECT_FALSE(softmax.count("chunk"));
  EXPECT_TRUE(softmax.count("query_tile"));
}

TEST_F(TuningSearch, SameSeedAndResultsGiveTheSameCandidates) {
  Spec spec = parseSpec("heads=4 d_k=64 mask=causal");
  auto run = [&](uint64_t seed) {
    Search search(tuningSpaces(spec, parseTarget("host")), seed, Shard{}, 5);
    std::map<std::string, double> results;
    std::vector<std::string> names;
    for (int i = 0; i < 25; ++i) {
      std::optional<Candidate> c = search.next(results);
      names.push_back(c->name());
      results[c->name()] = static_cast<double>(names.back().size() % 13); // any fixed function
    }
    return names;
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

// Drives a search for `trials` proposals with cost(candidate) as the result of each, and
// returns the proposals' names and the best cost seen.
template <class Cost>
std::pair<std::vector<std::string>, double> drive(Search& search, int trials, Cost cost) {
  std::map<std::string, double> results;
  std::vector<std::string> names;
  double best = INFINITY;
  for (int i = 0; i < trials; ++i) {
    std::optional<Candidate> c = search.next(results);
    if (!c)
      break;
    names.push_back(c->name());
    results[c->name()] = cost(*c);
    best = std::min(best, results[c->name()]);
  }
  return {names, best};
}

TEST_F(TuningSearch, AutoschedulersComeRightAfterTheDefaults) {
  Spec spec = parseSpec("heads=4 d_k=64");
  std::vector<TuningSpace> spaces = tuningSpaces(spec, parseTarget("host"));
  Search search(spaces, 1, Shard{}, 4);
  auto [names, best] = drive(search, 5, [](const Candidate&) { return 1.0; });
  ASSERT_EQ(names.size(), 5u);
  // The two defaults (halide, mlir), then Halide's three autoschedulers on halide's default.
  for (int a = 1; a <= 3; ++a)
    EXPECT_NE(names[static_cast<size_t>(1 + a)].find("halide autoscheduler=" + std::to_string(a)),
              std::string::npos)
        << names[static_cast<size_t>(1 + a)];
  // None on CUDA, where the halide backend keeps its own schedule.
  for (const TuningSpace& s : tuningSpaces(spec, parseTarget("cuda-sm_90")))
    EXPECT_TRUE(s.generated.empty()) << s.backend;
}

TEST_F(TuningSearch, RandomStrategyIsAWarmStartThatNeverEnds) {
  Spec spec = parseSpec("heads=4 d_k=64");
  auto cost = [](const Candidate& c) { return static_cast<double>(c.name().size() % 7); };
  Search random(tuningSpaces(spec, parseTarget("host")), 9, Shard{}, 4, Strategy::Random);
  Search warmOnly(tuningSpaces(spec, parseTarget("host")), 9, Shard{}, 1000,
                  Strategy::Evolution);
  EXPECT_EQ(drive(random, 40, cost).first, drive(warmOnly, 40, cost).first);
  EXPECT_THROW(parseStrategy("annealing"), UsageError);
}

// On a smooth landscape (time grows with the distance, in steps of the choice lists, from a
// hidden best schedule), evolution from the fastest few finds better schedules than uniform
// draws at the same budget, over many seeds. The measured counterpart on real kernels is in
// docs/benchmarks.md.
TEST_F(TuningSearch, EvolutionBeatsRandomOnASmoothLandscape) {
  Spec spec = parseSpec("heads=4 d_k=64");
  const std::vector<TuningSpace> spaces = tuningSpaces(spec, parseTarget("host"));
  auto cost = [&](const Candidate& c) {
    double distance = c.backend == "mlir" ? 0 : 2;
    for (const TuningSpace& s : spaces)
      if (s.backend == c.backend)
        for (const ParamSpace& p : s.params) {
          const auto at =
              std::find(p.choices.begin(), p.choices.end(), c.values.at(std::string(p.name))) -
              p.choices.begin();
          distance += std::abs(static_cast<double>(at) - static_cast<double>(p.choices.size()) / 3);
        }
    return 1 + distance;
  };
  double evolution = 0, random = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Search e(spaces, seed, Shard{}, 10, Strategy::Evolution);
    Search r(spaces, seed, Shard{}, 10, Strategy::Random);
    evolution += drive(e, 40, cost).second;
    random += drive(r, 40, cost).second;
  }
  EXPECT_LT(evolution, 0.8 * random)
      << "mean best: evolution " << evolution / 20 << ", random " << random / 20;
}

TEST_F(TuningSearch, ShardsSplitTheSpace) {
  Spec spec = parseSpec("heads=4 d_k=64");
  std::vector<TuningSpace> spaces = tuningSpaces(spec, parseTarget("host"));
  std::set<std::string> seen[3];
  for (int i = 0; i < 3; ++i) {
    Search search(spaces, 1, Shard{i, 3}, 1000);
    std::map<std::string, double> results;
    for (int n = 0; n < 30; ++n) {
      std::optional<Candidate> c = search.next(results);
      ASSERT_TRUE(c);
      results[c->name()] = 1;
      if (n >= static_cast<int>(spaces.size())) { // past the defaults, which every shard runs
        EXPECT_TRUE((Shard{i, 3}.owns(*c)));
        seen[i].insert(c->name());
      }
    }
  }
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      for (const std::string& name : seen[i])
        EXPECT_FALSE(seen[j].count(name)) << name;
  EXPECT_THROW(Shard::parse("3/3"), UsageError);
  EXPECT_THROW(Shard::parse("1/"), UsageError);
  EXPECT_EQ(Shard::parse("1/4").text(), "1/4");
}

tuning::TrialRecord record(int i) {
  tuning::TrialRecord r;
  r.uid = tuning::newUid();
  r.key = {"hash", "spec", tuning::ShapeBucket::of(1000, 1000), "host", "cpu: test", "0"};
  r.backend = "mlir";
  r.toolchain = "LLVM test";
  r.params = {{"key_block", i}};
  r.status = tuning::TrialStatus::Ok;
  r.medianMs = i;
  r.createdAt = tuning::utcNow();
  return r;
}

class TuningDatabaseTest : public ::testing::Test {
protected:
  test::ScratchDir scratch_{"tuning"};
  const std::filesystem::path& dir_ = scratch_.path();
};

TEST_F(TuningDatabaseTest, ConcurrentWritersLoseNothing) {
  const std::filesystem::path path = dir_ / "shared.db";
  constexpr int kWriters = 4, kEach = 50;
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w)
    writers.emplace_back([&] {
      // Each writer has its own connection, as separate tune processes do.
      tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadWrite);
      for (int i = 0; i < kEach; ++i)
        db.insert(record(i));
    });
  for (std::thread& t : writers)
    t.join();
  tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadOnly);
  EXPECT_EQ(db.all().size(), static_cast<size_t>(kWriters * kEach));
  EXPECT_EQ(db.trials(record(0).key).size(), static_cast<size_t>(kWriters * kEach));
}

// An installed system database sits in a directory its readers cannot write, where a WAL
// database's -wal and -shm files cannot be made. Root ignores permissions, so as root the
// reading happens in a child process that has become nobody.
TEST_F(TuningDatabaseTest, ReadableWhereNothingCanBeWritten) {
  const std::filesystem::path system = dir_ / "system";
  const std::filesystem::path path = system / "tuning?#%.db"; // URI characters are escaped
  {
    tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadWrite);
    for (int i = 0; i < 5; ++i)
      db.insert(record(i));
  }
  std::filesystem::permissions(system, std::filesystem::perms::owner_write |
                                           std::filesystem::perms::group_write |
                                           std::filesystem::perms::others_write,
                               std::filesystem::perm_options::remove);
  auto readAll = [&] {
    tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadOnly);
    return db.all().size();
  };
  if (::geteuid() != 0) {
    EXPECT_EQ(readAll(), 5u);
  } else {
    const pid_t child = ::fork();
    if (child == 0) {
      constexpr uid_t kNobody = 65534;
      bool read = false;
      try {
        read = ::setgid(kNobody) == 0 && ::setuid(kNobody) == 0 && readAll() == 5;
      } catch (const tuning::DatabaseError&) {
      }
      ::_exit(read ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "nobody could not read it";
  }
  EXPECT_EQ(std::filesystem::directory_iterator(system)->path(), path); // nothing was written
  std::filesystem::permissions(system, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
}

TEST_F(TuningDatabaseTest, DamagedFilesAreReportedAndKept) {
  const std::filesystem::path path = dir_ / "damaged.db";
  {
    tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadWrite);
    for (int i = 0; i < 20; ++i)
      db.insert(record(i));
  }
  // Overwrite every page but the first: the header and the schema survive, the tables do not.
  const auto size = std::filesystem::file_size(path);
  constexpr std::streamoff kPage = 4096;
  ASSERT_GT(size, 2u * kPage);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kPage);
    std::string junk(static_cast<size_t>(size - kPage), '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const auto damaged = std::filesystem::file_size(path);
  try {
    tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadOnly);
    db.all();
    FAIL() << "a damaged database was read without an error";
  } catch (const tuning::DatabaseError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::filesystem::file_size(path), damaged);

  const std::filesystem::path text = dir_ / "notes.txt";
  std::ofstream(text) << std::string(4096, 'x');
  EXPECT_THROW(tuning::TuningDatabase(text, tuning::TuningDatabase::Mode::ReadWrite),
               tuning::DatabaseError);
  EXPECT_EQ(std::filesystem::file_size(text), 4096u);
}

// Databases of this schema version written before trials kept their build: read as ''
// (reused only if they are times), and the column added when a writer opens them.
TEST_F(TuningDatabaseTest, ADatabaseWithoutBuildsIsReadAndGainsThem) {
  const std::filesystem::path path = dir_ / "older.db";
  tuning::TrialRecord built = record(1);
  built.build = "0123456789abcdef";
  {
    tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadWrite);
    db.insert(built);
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, "ALTER TABLE trials DROP COLUMN build", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  {
    tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadOnly);
    ASSERT_EQ(db.all().size(), 1u);
    EXPECT_EQ(db.all()[0].build, "");
  }
  tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadWrite);
  built.uid = tuning::newUid();
  db.insert(built);
  ASSERT_EQ(db.all().size(), 2u);
  EXPECT_EQ(db.all()[1].build, built.build);
}

TEST(ShapeBucket, PowersOfTwo) {
  EXPECT_EQ(tuning::ShapeBucket::of(1, 1000).text(), "Tq 1-1, Tk 512-1023");
  EXPECT_TRUE(tuning::ShapeBucket::of(2048, 2048).contains(4095, 2048));
  EXPECT_FALSE(tuning::ShapeBucket::of(2048, 2048).contains(4096, 2048));
}

} // namespace
} // namespace attnc
