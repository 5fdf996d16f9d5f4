// The search of `attnc tune`: which schedule to measure next.
//
// Each backend's default goes first, so the best found is never slower than the default, then
// the whole schedules other generators made (TuningSpace::generated: Halide's autoschedulers).
// Then `warmStart` candidates drawn uniformly from the spaces (every backend's, so the backend is
// itself a choice), then evolution: a parent drawn from the fastest few measured so far,
// mutated in one or two parameters, mostly to a neighbouring choice (tile sizes have smooth
// effects), sometimes to any. Candidates that fail their backend's check are never proposed.
//
// `Strategy::Random` skips the evolution (every proposal after the defaults is a uniform
// draw): the baseline that benchmarks compare the evolution against at equal budgets.
//
// The search is a pure function of the seed and the results so far, so a resumed run (whose
// earlier results come from the database) proposes the same candidates in the same order. A
// shard only proposes the candidates whose name hashes to it (the defaults go to every shard).
#ifndef ATTNC_COMPILER_TUNING_SEARCH_H
#define ATTNC_COMPILER_TUNING_SEARCH_H

#include "Backends/Backend.h"

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace attnc::tuning {

struct Candidate {
  std::string backend;
  std::map<std::string, int64_t> values; // the whole schedule, untuned parameters at default
  // "mlir key_block=128 query_tile=48 ...", as TrialRecord::candidate() names its trial.
  std::string name() const;
  static Candidate defaultOf(const TuningSpace& space);
};

struct Shard {
  int index = 0, count = 1;
  bool owns(const Candidate& candidate) const;
  std::string text() const;                    // "I/N", "" for the whole search
  static Shard parse(const std::string& text); // "I/N" with 0 <= I < N; throws UsageError
};

enum class Strategy { Evolution, Random };
Strategy parseStrategy(const std::string& name); // "evolution" | "random"; throws UsageError

class Search {
public:
  Search(std::vector<TuningSpace> spaces, uint64_t seed, Shard shard, int warmStart,
         Strategy strategy = Strategy::Evolution);

  // The next untried candidate, given every result so far (candidate name -> median ms,
  // infinity for a failed trial); nullopt when this shard has no valid untried one left.
  std::optional<Candidate> next(const std::map<std::string, double>& results);

  const std::vector<TuningSpace>& spaces() const { return spaces_; }

private:
  bool acceptable(const Candidate& c, const std::map<std::string, double>& results) const;
  Candidate random(const TuningSpace& space);
  std::optional<Candidate> mutated(const std::map<std::string, double>& results);
  std::optional<Candidate> anyUntried(const std::map<std::string, double>& results);
  const TuningSpace& spaceOf(const std::string& backend) const;

  std::vector<TuningSpace> spaces_;
  std::mt19937_64 rng_;
  Shard shard_;
  int warmStart_;
  Strategy strategy_;
  int proposed_ = 0;
  // Every candidate this search has named (the defaults and its proposals), by name: the
  // parents evolution draws from.
  std::map<std::string, Candidate> named_;
};

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_SEARCH_H
