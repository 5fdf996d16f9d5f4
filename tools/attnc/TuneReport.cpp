// The tuning report of TuneReport.h: the tables written as markdown, the plot drawn on a Plot.h
// canvas.
#include "TuneReport.h"

#include "Plot.h"
#include "Support/Errors.h"
#include "Tuning/Search.h"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <limits>
#include <map>

namespace attnc::tools {
namespace {

using tuning::TrialRecord;
using tuning::TrialStatus;

double msOf(const TrialRecord& r) {
  return r.status == TrialStatus::Ok ? r.medianMs : std::numeric_limits<double>::infinity();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

Rgb colorOf(const std::string& backend) {
  if (backend == "halide")
    return hexColor(0x1f77b4);
  if (backend == "mlir")
    return hexColor(0xd62728);
  return hexColor(0x7f7f7f);
}

constexpr Rgb kInk = hexColor(0x000000), kAxisLine = hexColor(0x333333);
constexpr Stroke kFailedMark = {hexColor(0x999999)};
constexpr double kDotRadius = 3, kDotOpacity = 0.7, kCrossHalfSide = 3;

void dot(Canvas& canvas, Point centre, const std::string& backend) {
  canvas.circle(centre, kDotRadius, colorOf(backend), kDotOpacity);
}

struct Parameter {
  std::string backend, name;
  std::vector<int64_t> choices;
};

std::vector<Parameter> parametersOf(const std::vector<TuningSpace>& spaces,
                                    const std::vector<TrialRecord>& trials) {
  std::vector<Parameter> out;
  for (const TuningSpace& s : spaces) {
    const bool tried = std::any_of(trials.begin(), trials.end(),
                                   [&](const TrialRecord& r) { return r.backend == s.backend; });
    if (tried)
      for (const ParamSpace& p : s.params)
        out.push_back({s.backend, std::string(p.name), p.choices});
  }
  return out;
}

// The plot of TuneReport.h, written to `path`: the title, then the two panels below.
void drawPlot(const std::filesystem::path& path, const std::vector<TrialRecord>& trials,
              const std::vector<Parameter>& parameters, const std::string& title) {
  constexpr int kWidth = 960, kLeft = 60, kRight = 940;
  constexpr int kCell = 150, kCellHeight = 150, kPerRow = 6;
  double best = std::numeric_limits<double>::infinity(), slowest = 0;
  for (const TrialRecord& r : trials)
    if (std::isfinite(msOf(r))) {
      best = std::min(best, msOf(r));
      slowest = std::max(slowest, msOf(r));
    }
  const int rows = static_cast<int>((parameters.size() + kPerRow - 1) / kPerRow);
  Canvas canvas("--report", path, kWidth, 380 + rows * (kCellHeight + 30) + 20);
  canvas.text({kLeft, 22}, title, {.size = 13});

  // Panel 1: every trial in search order (failed ones as crosses above the plot), and the
  // best time so far. Times on a log scale: tile sizes change times by factors, and the
  // interesting trials are the ones near the best, which a linear axis would squash under the
  // slowest; for the same reason the axis ends at 20 times the best, slower trials sitting at
  // its top.
  const double hi = std::min(slowest, best * 20) * 1.05;
  const LogAxis axis{best * 0.95, std::max(hi, best * 1.2), 60, 330};
  drawLogAxis(canvas, axis, kLeft, kRight);
  canvas.line({kLeft, axis.bottom}, {kRight, axis.bottom}, {kAxisLine});
  canvas.text({kLeft - 40, 50}, "ms (log)", {.size = 10});
  const double step = (kRight - kLeft - 10) / std::max<double>(1, trials.size());
  auto xOf = [&](size_t i) { return kLeft + 5 + step * (static_cast<double>(i) + 0.5); };
  std::vector<Point> bestSoFar;
  double running = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& r = trials[i];
    const double ms = msOf(r);
    if (std::isfinite(ms))
      dot(canvas, {xOf(i), axis.y(ms)}, r.backend);
    else
      canvas.cross({xOf(i), axis.top - 10}, kCrossHalfSide, kFailedMark);
    if (ms < running) {
      if (!bestSoFar.empty())
        bestSoFar.push_back({xOf(i), bestSoFar.back().y});
      running = ms;
    }
    if (std::isfinite(running))
      bestSoFar.push_back({xOf(i), axis.y(running)});
  }
  canvas.polyline(bestSoFar, {kInk, 1.5});
  for (size_t i = 0; i < trials.size(); i += std::max<size_t>(1, trials.size() / 10))
    canvas.text({xOf(i), axis.bottom + 14}, std::to_string(i + 1),
                {.size = 10, .align = Align::Middle});
  canvas.text({(kLeft + kRight) / 2.0, axis.bottom + 30}, "trial, in the order the search ran them",
              {.size = 11, .align = Align::Middle});
  const TextStyle legendText = {.size = 11, .centred = true};
  constexpr double kLegendY = 40;
  double legend = kRight - 330;
  for (const std::string backend : {"halide", "mlir"}) {
    dot(canvas, {legend, kLegendY}, backend);
    canvas.text({legend + 8, kLegendY}, backend, legendText);
    legend += 70;
  }
  canvas.line({legend, kLegendY}, {legend + 20, kLegendY}, {kInk, 1.5});
  canvas.text({legend + 24, kLegendY}, "best so far", legendText);
  canvas.cross({legend + 110, kLegendY}, kCrossHalfSide, kFailedMark);
  canvas.text({legend + 118, kLegendY}, "failed", legendText);

  // Panel 2: per parameter, each ok trial's time at the value it had (jittered sideways), and
  // a bar at the best time per value: flat bars mean the parameter hardly matters.
  for (size_t p = 0; p < parameters.size(); ++p) {
    const Parameter& param = parameters[p];
    const double x0 = kLeft + static_cast<double>(p % kPerRow) * kCell;
    const double y0 = 390 + static_cast<double>(p / kPerRow) * (kCellHeight + 30);
    const LogAxis cell{axis.lo, axis.hi, y0 + 10, y0 + kCellHeight - 20};
    canvas.text({x0 + kCell / 2.0, y0}, param.backend + " " + param.name,
                {.size = 11, .align = Align::Middle});
    canvas.line({x0 + 5, cell.bottom}, {x0 + kCell - 10, cell.bottom}, {kAxisLine});
    const double slot = (kCell - 20.0) / static_cast<double>(param.choices.size());
    for (size_t c = 0; c < param.choices.size(); ++c) {
      const double cx = x0 + 10 + slot * (static_cast<double>(c) + 0.5);
      canvas.text({cx, cell.bottom + 13}, std::to_string(param.choices[c]),
                  {.size = 9, .align = Align::Middle});
      double bestHere = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < trials.size(); ++i) {
        const TrialRecord& r = trials[i];
        const double ms = msOf(r);
        if (r.backend != param.backend || !std::isfinite(ms) ||
            r.params.value(param.name, int64_t{-1}) != param.choices[c])
          continue;
        const double jitter = (static_cast<double>(i * 7 % 11) / 10.0 - 0.5) * slot * 0.5;
        dot(canvas, {cx + jitter, cell.y(ms)}, r.backend);
        bestHere = std::min(bestHere, ms);
      }
      if (std::isfinite(bestHere))
        canvas.line({cx - slot * 0.4, cell.y(bestHere)}, {cx + slot * 0.4, cell.y(bestHere)},
                    {kInk, 2});
    }
  }
  canvas.write();
}

} // namespace

void writeTuneReport(const std::vector<TrialRecord>& trials, const std::vector<TuningSpace>& spaces,
                     std::ostream& out, const std::filesystem::path& plotPath) {
  if (trials.empty())
    throw UsageError("--report: the database has no trials for this spec, shape bucket, target "
                     "and machine; run attnc tune with the same spec, --target and --seq-q/--seq-k "
                     "first");
  const tuning::TuningKey& key = trials.front().key;
  out << fmt::format("# Tuning report: {}\n\n{} on {}, {}; {} trials\n\n", key.spec,
                     key.bucket.text(), key.target, key.hardware, trials.size());

  std::map<std::string, int> byStatus;
  for (const TrialRecord& r : trials)
    ++byStatus[tuning::statusName(r.status)];
  out << "| status | trials |\n|---|---|\n";
  for (const auto& [status, n] : byStatus)
    out << fmt::format("| {} | {} |\n", status, n);

  // Per backend: its default, its best and the ratio. The overall default is the fastest
  // default, which is what compile uses without tuning records when asked for either backend.
  // A trial of the default: every value it records is the default's (parameters added since
  // the trial was recorded are at their defaults).
  auto isDefault = [](const TrialRecord& r, const TuningSpace& s) {
    const std::map<std::string, int64_t> standard = tuning::Candidate::defaultOf(s).values;
    for (const auto& [name, value] : r.params.items())
      if (!standard.count(name) || standard.at(name) != value.get<int64_t>())
        return false;
    return r.backend == s.backend;
  };
  out << "\n| backend | default ms | best ms | best / default speed | best schedule |\n"
         "|---|---|---|---|---|\n";
  double bestDefault = std::numeric_limits<double>::infinity();
  for (const TuningSpace& s : spaces) {
    double defaultMs = NAN;
    for (const TrialRecord& r : trials)
      if (isDefault(r, s))
        defaultMs = msOf(r);
    double bestMs = std::numeric_limits<double>::infinity();
    std::string bestName;
    for (const TrialRecord& r : trials)
      if (r.backend == s.backend && msOf(r) < bestMs) {
        bestMs = msOf(r);
        bestName = r.candidate();
      }
    if (bestName.empty())
      continue;
    if (std::isfinite(defaultMs))
      bestDefault = std::min(bestDefault, defaultMs);
    out << fmt::format("| {} | {} | {:.3f} | {} | `{}` |\n", s.backend,
                       std::isfinite(defaultMs) ? fmt::format("{:.3f}", defaultMs) : "-", bestMs,
                       std::isfinite(defaultMs) ? fmt::format("{:.2f}x", defaultMs / bestMs) : "-",
                       bestName);
  }

  std::vector<const TrialRecord*> ranked;
  for (const TrialRecord& r : trials)
    if (std::isfinite(msOf(r)))
      ranked.push_back(&r);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const TrialRecord* a, const TrialRecord* b) { return msOf(*a) < msOf(*b); });
  out << "\n| rank | trial | schedule | median ms (p10-p90) | vs fastest default |\n"
         "|---|---|---|---|---|\n";
  for (size_t i = 0; i < std::min<size_t>(ranked.size(), 10); ++i) {
    const TrialRecord& r = *ranked[i];
    const size_t order = static_cast<size_t>(&r - trials.data()) + 1;
    out << fmt::format("| {} | {} | `{}` | {:.3f} ({:.3f}-{:.3f}) | {} |\n", i + 1, order,
                       r.candidate(), r.medianMs, r.p10Ms, r.p90Ms,
                       std::isfinite(bestDefault) ? fmt::format("{:.2f}x", bestDefault / r.medianMs)
                                                  : "-");
  }

  const std::vector<Parameter> parameters = parametersOf(spaces, trials);
  out << "\n| backend | parameter | value | ok trials | best ms | median ms |\n"
         "|---|---|---|---|---|---|\n";
  for (const Parameter& p : parameters)
    for (int64_t value : p.choices) {
      std::vector<double> times;
      for (const TrialRecord& r : trials)
        if (r.backend == p.backend && std::isfinite(msOf(r)) &&
            r.params.value(p.name, int64_t{-1}) == value)
          times.push_back(msOf(r));
      if (!times.empty())
        out << fmt::format("| {} | {} | {} | {} | {:.3f} | {:.3f} |\n", p.backend, p.name, value,
                           times.size(), *std::min_element(times.begin(), times.end()),
                           median(times));
    }

  if (ranked.empty())
    throw UsageError("--report: none of the " + std::to_string(trials.size()) +
                     " trials ran correctly, so there is nothing to plot");
  drawPlot(plotPath, trials, parameters,
           fmt::format("{} ({}, {}, {} trials)", key.spec, key.bucket.text(), key.target,
                       trials.size()));
  out << fmt::format("\nplot: {}\n", plotPath.string());
}

} // namespace attnc::tools
