#include "Tuning/Search.h"

#include "Support/Errors.h"
#include "attnc/Hash.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace attnc::tuning {
namespace {

// Parents are drawn from this many of the fastest candidates measured.
constexpr size_t kParents = 4;
// Random draws before the search enumerates what is left (small or nearly exhausted spaces).
constexpr int kDraws = 256;

size_t indexOf(const ParamSpace& p, int64_t value) {
  auto it = std::find(p.choices.begin(), p.choices.end(), value);
  return it == p.choices.end() ? 0 : static_cast<size_t>(it - p.choices.begin());
}

} // namespace

std::string Candidate::name() const {
  std::string text = backend;
  for (const auto& [name, value] : values)
    text += " " + name + "=" + std::to_string(value);
  return text;
}

Candidate Candidate::defaultOf(const TuningSpace& space) {
  return {space.backend, space.defaults.toJson()["params"].get<std::map<std::string, int64_t>>()};
}

bool Shard::owns(const Candidate& candidate) const {
  return count <= 1 ||
         fnv1a64(candidate.name()) % static_cast<uint64_t>(count) == static_cast<uint64_t>(index);
}

std::string Shard::text() const {
  return count <= 1 ? "" : std::to_string(index) + "/" + std::to_string(count);
}

Shard Shard::parse(const std::string& text) {
  Shard shard;
  const size_t slash = text.find('/');
  auto number = [&](size_t from, size_t to, int& out) {
    auto [end, ec] = std::from_chars(text.data() + from, text.data() + to, out);
    return ec == std::errc() && end == text.data() + to && from < to;
  };
  if (slash == std::string::npos || !number(0, slash, shard.index) ||
      !number(slash + 1, text.size(), shard.count) || shard.count < 1 || shard.index < 0 ||
      shard.index >= shard.count)
    throw UsageError("--shard " + text + ": expected I/N with 0 <= I < N, e.g. 0/4");
  return shard;
}

Strategy parseStrategy(const std::string& name) {
  if (name == "evolution")
    return Strategy::Evolution;
  if (name == "random")
    return Strategy::Random;
  throw UsageError("--strategy " + name + ": unknown; known: evolution, random");
}

Search::Search(std::vector<TuningSpace> spaces, uint64_t seed, Shard shard, int warmStart,
               Strategy strategy)
    : spaces_(std::move(spaces)), rng_(seed), shard_(shard), warmStart_(warmStart),
      strategy_(strategy) {
  if (spaces_.empty())
    throw UsageError("no backend of this attnc can be tuned");
}

const TuningSpace& Search::spaceOf(const std::string& backend) const {
  for (const TuningSpace& s : spaces_)
    if (s.backend == backend)
      return s;
  throw std::out_of_range("no tuning space for backend " + backend);
}

bool Search::acceptable(const Candidate& c, const std::map<std::string, double>& results) const {
  if (results.count(c.name()) || !shard_.owns(c))
    return false;
  try {
    spaceOf(c.backend).check(ScheduleParams(c.backend, c.values, ""));
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

Candidate Search::random(const TuningSpace& space) {
  // Parameters not searched keep the default's values.
  Candidate c = Candidate::defaultOf(space);
  for (const ParamSpace& p : space.params)
    c.values[std::string(p.name)] =
        p.choices[std::uniform_int_distribution<size_t>(0, p.choices.size() - 1)(rng_)];
  return c;
}

std::optional<Candidate> Search::mutated(const std::map<std::string, double>& results) {
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [name, ms] : results)
    if (std::isfinite(ms))
      ranked.emplace_back(ms, name);
  if (ranked.empty())
    return std::nullopt;
  std::sort(ranked.begin(), ranked.end());
  ranked.resize(std::min(ranked.size(), kParents));
  for (int attempt = 0; attempt < kDraws; ++attempt) {
    const std::string& parentName =
        ranked[std::uniform_int_distribution<size_t>(0, ranked.size() - 1)(rng_)].second;
    auto parent = named_.find(parentName);
    if (parent == named_.end())
      continue; // measured by another search (a shard): not a parent here
    Candidate child = parent->second;
    const TuningSpace& space = spaceOf(child.backend);
    if (space.params.empty())
      return std::nullopt;
    const int changes = std::bernoulli_distribution(0.7)(rng_) ? 1 : 2;
    for (int m = 0; m < changes; ++m) {
      const ParamSpace& p =
          space.params[std::uniform_int_distribution<size_t>(0, space.params.size() - 1)(rng_)];
      int64_t& value = child.values[std::string(p.name)];
      const size_t at = indexOf(p, value), last = p.choices.size() - 1;
      if (std::bernoulli_distribution(0.75)(rng_)) {
        const bool up = at == 0 || (at < last && std::bernoulli_distribution(0.5)(rng_));
        value = p.choices[up ? std::min(at + 1, last) : at - 1];
      } else {
        value = p.choices[std::uniform_int_distribution<size_t>(0, last)(rng_)];
      }
    }
    if (acceptable(child, results))
      return child;
  }
  return std::nullopt;
}

std::optional<Candidate> Search::anyUntried(const std::map<std::string, double>& results) {
  for (int attempt = 0; attempt < kDraws; ++attempt) {
    const TuningSpace& space =
        spaces_[std::uniform_int_distribution<size_t>(0, spaces_.size() - 1)(rng_)];
    Candidate c = random(space);
    if (acceptable(c, results))
      return c;
  }
  // Few are left: enumerate every space's product of choices and draw among the untried.
  std::vector<Candidate> left;
  for (const TuningSpace& space : spaces_) {
    Candidate c = random(space);
    std::vector<size_t> at(space.params.size(), 0);
    while (true) {
      for (size_t i = 0; i < at.size(); ++i)
        c.values[std::string(space.params[i].name)] = space.params[i].choices[at[i]];
      if (acceptable(c, results))
        left.push_back(c);
      size_t i = 0;
      while (i < at.size() && ++at[i] == space.params[i].choices.size())
        at[i++] = 0;
      if (i == at.size())
        break;
    }
  }
  if (left.empty())
    return std::nullopt;
  return left[std::uniform_int_distribution<size_t>(0, left.size() - 1)(rng_)];
}

std::optional<Candidate> Search::next(const std::map<std::string, double>& results) {
  std::optional<Candidate> c;
  for (const TuningSpace& space : spaces_) {
    Candidate standard = Candidate::defaultOf(space);
    named_.emplace(standard.name(), standard);
    if (!c && !results.count(standard.name()))
      c = standard;
  }
  // Then the candidates other generators made (Halide's autoschedulers).
  for (const TuningSpace& space : spaces_)
    for (const auto& values : space.generated) {
      Candidate generated{space.backend, values};
      if (!c && acceptable(generated, results))
        c = generated;
    }
  if (!c) {
    const bool warm = proposed_++ < warmStart_ || strategy_ == Strategy::Random;
    c = warm ? std::nullopt : mutated(results);
    if (!c)
      c = anyUntried(results);
  }
  if (c)
    named_.emplace(c->name(), *c);
  return c;
}

} // namespace attnc::tuning
