#include "TuneReport.h"

#include "OutputFile.h"

#include "Support/Errors.h"
#include "Tuning/Search.h"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

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

std::string colorOf(const std::string& backend) {
  if (backend == "halide")
    return "#1f77b4";
  if (backend == "mlir")
    return "#d62728";
  return "#7f7f7f";
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

// Times on a log scale: tile sizes change times by factors, and the interesting trials are the
// ones near the best, which a linear axis would squash under the slowest.
struct LogAxis {
  double lo, hi;      // ms at the bottom and top
  double top, bottom; // pixels
  double y(double ms) const {
    const double t =
        (std::log(std::clamp(ms, lo, hi)) - std::log(lo)) / (std::log(hi) - std::log(lo));
    return bottom - t * (bottom - top);
  }
  // 1-2-5 steps within the range.
  std::vector<double> ticks() const {
    std::vector<double> out;
    for (double decade = std::pow(10, std::floor(std::log10(lo))); decade <= hi; decade *= 10)
      for (double step : {1.0, 2.0, 5.0})
        if (step * decade >= lo && step * decade <= hi)
          out.push_back(step * decade);
    if (out.size() < 2)
      out = {lo, hi};
    return out;
  }
};

std::string tickText(double ms) {
  return ms >= 10  ? fmt::format("{:.0f}", ms)
         : ms >= 1 ? fmt::format("{:.1f}", ms)
                   : fmt::format("{:.2f}", ms);
}

class Svg {
public:
  Svg(int width, int height) : width_(width), height_(height) {}
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double w = 1) {
    body_ << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" )"
                         R"(stroke-width="{}"/>)"
                         "\n",
                         x1, y1, x2, y2, stroke, w);
  }
  void dot(double x, double y, const std::string& fill, const std::string& title) {
    body_ << fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}" fill-opacity="0.7">)"
                         "<title>{}</title></circle>\n",
                         x, y, fill, escaped(title));
  }
  void cross(double x, double y, const std::string& title) {
    body_ << fmt::format(R"(<path d="M{:.1f},{:.1f}l6,6m0,-6l-6,6" stroke="#999"><title>{})"
                         "</title></path>\n",
                         x - 3, y - 3, escaped(title));
  }
  void text(double x, double y, const std::string& s, const std::string& anchor = "start",
            int size = 11) {
    body_ << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="{}">{}</text>)"
                         "\n",
                         x, y, size, anchor, escaped(s));
  }
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke) {
    body_ << R"(<polyline fill="none" stroke=")" << stroke << R"(" stroke-width="1.5" points=")";
    for (const auto& [x, y] : points)
      body_ << fmt::format("{:.1f},{:.1f} ", x, y);
    body_ << "\"/>\n";
  }
  void yAxis(const LogAxis& axis, double x, double right) {
    for (double t : axis.ticks()) {
      line(x, axis.y(t), right, axis.y(t), "#eee");
      text(x - 4, axis.y(t) + 4, tickText(t), "end", 10);
    }
    line(x, axis.top, x, axis.bottom, "#333");
  }
  std::string str() const {
    return fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" )"
                       R"(font-family="sans-serif">)"
                       "\n"
                       R"(<rect width="100%" height="100%" fill="white"/>)"
                       "\n{}</svg>\n",
                       width_, height_, body_.str());
  }

private:
  int width_, height_;
  std::ostringstream body_;
};

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

std::string plot(const std::vector<TrialRecord>& trials, const std::vector<Parameter>& parameters,
                 const std::string& title) {
  constexpr int kWidth = 960, kLeft = 60, kRight = 940;
  constexpr int kCell = 150, kCellHeight = 150, kPerRow = 6;
  double best = std::numeric_limits<double>::infinity(), slowest = 0;
  for (const TrialRecord& r : trials)
    if (std::isfinite(msOf(r))) {
      best = std::min(best, msOf(r));
      slowest = std::max(slowest, msOf(r));
    }
  const int rows = static_cast<int>((parameters.size() + kPerRow - 1) / kPerRow);
  Svg svg(kWidth, 380 + rows * (kCellHeight + 30) + 20);
  svg.text(kLeft, 22, title, "start", 13);

  // Panel 1: every trial in search order (failed ones as crosses above the plot), and the
  // best time so far.
  const double hi = std::min(slowest, best * 20) * 1.05;
  LogAxis axis{best * 0.95, std::max(hi, best * 1.2), 60, 330};
  svg.yAxis(axis, kLeft, kRight);
  svg.line(kLeft, axis.bottom, kRight, axis.bottom, "#333");
  svg.text(kLeft - 40, 50, "ms (log)", "start", 10);
  const double step = (kRight - kLeft - 10) / std::max<double>(1, trials.size());
  auto xOf = [&](size_t i) { return kLeft + 5 + step * (i + 0.5); };
  std::vector<std::pair<double, double>> bestSoFar;
  double running = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& r = trials[i];
    const double ms = msOf(r);
    const std::string label = fmt::format("#{} {}: {}", i + 1, r.candidate(),
                                          std::isfinite(ms) ? fmt::format("{:.3f} ms", ms)
                                                            : tuning::statusName(r.status));
    if (std::isfinite(ms))
      svg.dot(xOf(i), axis.y(ms), colorOf(r.backend), label);
    else
      svg.cross(xOf(i), axis.top - 10, label);
    if (ms < running) {
      if (!bestSoFar.empty())
        bestSoFar.push_back({xOf(i), bestSoFar.back().second});
      running = ms;
    }
    if (std::isfinite(running))
      bestSoFar.push_back({xOf(i), axis.y(running)});
  }
  svg.polyline(bestSoFar, "#000");
  for (size_t i = 0; i < trials.size(); i += std::max<size_t>(1, trials.size() / 10))
    svg.text(xOf(i), axis.bottom + 14, std::to_string(i + 1), "middle", 10);
  svg.text((kLeft + kRight) / 2.0, axis.bottom + 30, "trial, in the order the search ran them",
           "middle");
  double legend = kRight - 330;
  for (const std::string backend : {"halide", "mlir"}) {
    svg.dot(legend, 40, colorOf(backend), backend);
    svg.text(legend + 8, 44, backend);
    legend += 70;
  }
  svg.line(legend, 40, legend + 20, 40, "#000", 1.5);
  svg.text(legend + 24, 44, "best so far");
  svg.cross(legend + 110, 40, "failed");
  svg.text(legend + 118, 44, "failed");

  // Panel 2: per parameter, each ok trial's time at the value it had (jittered sideways), and
  // a bar at the best time per value: flat bars mean the parameter hardly matters.
  for (size_t p = 0; p < parameters.size(); ++p) {
    const Parameter& param = parameters[p];
    const double x0 = kLeft + static_cast<double>(p % kPerRow) * kCell;
    const double y0 = 390 + static_cast<double>(p / kPerRow) * (kCellHeight + 30);
    LogAxis cell{axis.lo, axis.hi, y0 + 10, y0 + kCellHeight - 20};
    svg.text(x0 + kCell / 2.0, y0, param.backend + " " + param.name, "middle");
    svg.line(x0 + 5, cell.bottom, x0 + kCell - 10, cell.bottom, "#333");
    const double slot = (kCell - 20.0) / static_cast<double>(param.choices.size());
    for (size_t c = 0; c < param.choices.size(); ++c) {
      const double cx = x0 + 10 + slot * (c + 0.5);
      svg.text(cx, cell.bottom + 13, std::to_string(param.choices[c]), "middle", 9);
      double bestHere = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < trials.size(); ++i) {
        const TrialRecord& r = trials[i];
        const double ms = msOf(r);
        if (r.backend != param.backend || !std::isfinite(ms) ||
            r.params.value(param.name, int64_t{-1}) != param.choices[c])
          continue;
        const double jitter = (static_cast<double>(i * 7 % 11) / 10.0 - 0.5) * slot * 0.5;
        svg.dot(cx + jitter, cell.y(ms), colorOf(r.backend),
                fmt::format("#{} {}: {:.3f} ms", i + 1, r.candidate(), ms));
        bestHere = std::min(bestHere, ms);
      }
      if (std::isfinite(bestHere))
        svg.line(cx - slot * 0.4, cell.y(bestHere), cx + slot * 0.4, cell.y(bestHere), "#000", 2);
    }
  }
  return svg.str();
}

} // namespace

void writeTuneReport(const std::vector<TrialRecord>& trials, const std::vector<TuningSpace>& spaces,
                     std::ostream& out, const std::filesystem::path& svgPath) {
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
  writeFileAtomically(svgPath, plot(trials, parameters,
                                    fmt::format("{} ({}, {}, {} trials)", key.spec,
                                                key.bucket.text(), key.target, trials.size())));
  out << fmt::format("\nplot: {}\n", svgPath.string());
}

} // namespace attnc::tools
