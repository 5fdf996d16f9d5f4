// The heatmap of Heatmap.h: its layout measured from the labels' text, then cells, labels, titles
// and colour bar drawn on a Plot.h canvas.
#include "Heatmap.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/core.h>

namespace attnc::tools {
namespace {

// Viridis sampled at nine even steps (matplotlib's map); colours between are interpolated in RGB,
// as the colour bar's gradient is, so the cells and the bar agree.
constexpr std::array<Rgb, 9> kViridis = {
    hexColor(0x440154), hexColor(0x472d7b), hexColor(0x3b528b),
    hexColor(0x2c728e), hexColor(0x21908c), hexColor(0x27ad81),
    hexColor(0x5dc863), hexColor(0xaadc32), hexColor(0xfde725)};

constexpr double kFontSize = 12;
constexpr double kMargin = 12;
constexpr double kTitleHeight = 22;
constexpr double kAxisTitleHeight = 16;
constexpr double kGap = 6;
constexpr double kBarWidth = 14;
constexpr double kBarGap = 18;
constexpr double kMinBarHeight = 120;
constexpr double kLegendHeight = 26;
constexpr size_t kMaxTokenBytes = 18;

constexpr Rgb kInk = {0.15, 0.15, 0.15};
constexpr TextStyle kLabel = {.size = kFontSize, .color = kInk};
constexpr TextStyle kTitle = {.size = kFontSize, .color = kInk, .bold = true};

// A long token is cut (at a UTF-8 character boundary) so one word cannot push the grid away.
std::string shortened(const std::string& token) {
  if (token.size() <= kMaxTokenBytes)
    return token;
  size_t end = kMaxTokenBytes;
  while (end > 0 && (static_cast<unsigned char>(token[end]) & 0xc0) == 0x80)
    --end;
  return token.substr(0, end) + "\u2026";
}

// Every label when a cell is tall enough for text; otherwise every step-th, the step a round
// number so that labels sit at least a line apart.
int64_t labelStep(double cell) {
  return static_cast<int64_t>(std::max(1.0, roundNumberAtLeast((kFontSize + 1) / cell)));
}

// The labels of an axis: (cell index, text). Positions label at round numbers.
std::vector<std::pair<int64_t, std::string>> axisLabels(const HeatmapAxis& axis, int64_t count,
                                                        double cell) {
  const int64_t step = labelStep(cell);
  std::vector<std::pair<int64_t, std::string>> labels;
  for (int64_t k = 0; k < count; ++k) {
    if (!axis.tokens.empty()) {
      if (k % step == 0)
        labels.emplace_back(k, shortened(axis.tokens[k]));
    } else if ((axis.first + k) % step == 0) {
      labels.emplace_back(k, std::to_string(axis.first + k));
    }
  }
  return labels;
}

double widestLabel(const std::vector<std::pair<int64_t, std::string>>& labels) {
  double widest = 0;
  for (const auto& [k, text] : labels)
    widest = std::max(widest, textWidth(text, kLabel));
  return widest;
}

double largestKept(const Heatmap& map) {
  double largest = 0;
  for (size_t k = 0; k < map.values.size(); ++k)
    if (map.kept[k])
      largest = std::max(largest, map.values[k]);
  return largest > 0 ? largest : 1;
}

std::vector<std::string> barLabels(double largest) {
  return {fmt::format("{:.3g}", largest), fmt::format("{:.3g}", largest / 2), "0"};
}

struct Geometry {
  HeatmapLayout layout;
  std::vector<std::pair<int64_t, std::string>> rowLabels, columnLabels;
  double barHeight;
};

// The cell's side is a whole number of pixels, and the grid's corner a whole pixel, so that
// adjacent cells meet on pixel edges with no blended seam between them.
Geometry measure(const Heatmap& map) {
  Geometry g;
  HeatmapLayout& l = g.layout;
  l.cell = std::clamp(std::floor(720.0 / static_cast<double>(std::max(map.rows, map.columns))), 1.0,
                      28.0);
  g.rowLabels = axisLabels(map.rowAxis, map.rows, l.cell);
  g.columnLabels = axisLabels(map.columnAxis, map.columns, l.cell);
  l.left = std::ceil(kMargin + kAxisTitleHeight + widestLabel(g.rowLabels) + kGap);
  l.top = std::ceil(kMargin + kTitleHeight + kAxisTitleHeight + widestLabel(g.columnLabels) + kGap);
  const double gridWidth = l.cell * static_cast<double>(map.columns);
  const double gridHeight = l.cell * static_cast<double>(map.rows);
  g.barHeight = std::max(gridHeight, kMinBarHeight);
  double barText = textWidth("masked", kLabel);
  for (const std::string& text : barLabels(largestKept(map)))
    barText = std::max(barText, textWidth(text, kLabel));
  const double barRight = l.left + gridWidth + kBarGap + kBarWidth + kGap + barText;
  l.width = std::ceil(std::max(barRight, 2 * kMargin + textWidth(map.title, kTitle)) + kMargin);
  l.height = std::ceil(l.top + g.barHeight + kLegendHeight + kMargin);
  return g;
}

void drawCells(Canvas& canvas, const Heatmap& map, const HeatmapLayout& l) {
  const double largest = largestKept(map);
  for (int64_t r = 0; r < map.rows; ++r)
    for (int64_t c = 0; c < map.columns; ++c) {
      const size_t k = static_cast<size_t>(r * map.columns + c);
      canvas.rectangle(
          {l.left + static_cast<double>(c) * l.cell, l.top + static_cast<double>(r) * l.cell},
          l.cell, l.cell, map.kept[k] ? heatColor(map.values[k] / largest) : maskedColor());
    }
}

void drawAxes(Canvas& canvas, const Heatmap& map, const Geometry& g) {
  const HeatmapLayout& l = g.layout;
  const TextStyle rowLabel = {
      .size = kFontSize, .color = kInk, .align = Align::End, .centred = true};
  const TextStyle columnLabel = {
      .size = kFontSize, .color = kInk, .centred = true, .angle = -M_PI / 2};
  for (const auto& [r, text] : g.rowLabels)
    canvas.text({l.left - kGap, l.top + (static_cast<double>(r) + 0.5) * l.cell}, text, rowLabel);
  for (const auto& [c, text] : g.columnLabels)
    canvas.text({l.left + (static_cast<double>(c) + 0.5) * l.cell, l.top - kGap}, text,
                columnLabel);
  canvas.text({l.left, kMargin + kTitleHeight + kFontSize}, map.columnAxis.title + " \u2192",
              kLabel);
  // Read upwards, as y-axis titles are, ending level with the first row, with the arrow at the
  // bottom pointing down the rows.
  const TextStyle rowTitle = {
      .size = kFontSize, .color = kInk, .align = Align::End, .angle = -M_PI / 2};
  canvas.text({kMargin + kFontSize, l.top}, "\u2190 " + map.rowAxis.title, rowTitle);
  canvas.text({kMargin, kMargin + kFontSize}, map.title, kTitle);
}

// The colour bar from 0 (bottom) to the largest kept weight (top), and the masked legend.
void drawColourBar(Canvas& canvas, const Heatmap& map, const Geometry& g) {
  const HeatmapLayout& l = g.layout;
  const double x = l.left + l.cell * static_cast<double>(map.columns) + kBarGap;
  canvas.verticalGradient({x, l.top}, kBarWidth, g.barHeight, kViridis);
  const TextStyle barLabel = {.size = kFontSize, .color = kInk, .centred = true};
  const std::vector<std::string> labels = barLabels(largestKept(map));
  for (size_t k = 0; k < labels.size(); ++k)
    canvas.text(
        {x + kBarWidth + kGap, l.top + g.barHeight * static_cast<double>(k) / (labels.size() - 1)},
        labels[k], barLabel);
  if (std::find(map.kept.begin(), map.kept.end(), 0) != map.kept.end()) {
    const double swatchTop = l.top + g.barHeight + kGap + 2;
    canvas.rectangle({x, swatchTop}, kBarWidth, kBarWidth, maskedColor());
    canvas.text({x + kBarWidth + kGap, swatchTop + kBarWidth / 2}, "masked", barLabel);
  }
}

} // namespace

Rgb heatColor(double t) {
  const double x = std::clamp(t, 0.0, 1.0) * (kViridis.size() - 1);
  const size_t k = std::min(static_cast<size_t>(x), kViridis.size() - 2);
  const double f = x - static_cast<double>(k);
  const Rgb &a = kViridis[k], &b = kViridis[k + 1];
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

Rgb maskedColor() {
  return {0.86, 0.86, 0.86};
}

HeatmapLayout heatmapLayout(const Heatmap& map) {
  return measure(map).layout;
}

void writeHeatmap(const Heatmap& map, const std::filesystem::path& path) {
  const Geometry g = measure(map);
  Canvas canvas("-o", path, g.layout.width, g.layout.height);
  drawCells(canvas, map, g.layout);
  drawAxes(canvas, map, g);
  drawColourBar(canvas, map, g);
  canvas.write();
}

} // namespace attnc::tools
