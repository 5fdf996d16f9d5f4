#include "Heatmap.h"

#include "OutputFile.h"
#include "Support/Errors.h"

#include <algorithm>
#include <array>
#include <cairo-svg.h>
#include <cairo.h>
#include <cmath>
#include <fmt/core.h>
#include <memory>

namespace attnc::tools {
namespace {

// Viridis sampled at nine even steps (matplotlib's map); colours between are interpolated in RGB,
// as cairo's gradient for the colour bar does, so the cells and the bar agree.
constexpr std::array<uint32_t, 9> kViridis = {0x440154, 0x472d7b, 0x3b528b, 0x2c728e, 0x21908c,
                                              0x27ad81, 0x5dc863, 0xaadc32, 0xfde725};

Rgb unpack(uint32_t rgb) {
  return {((rgb >> 16) & 0xff) / 255.0, ((rgb >> 8) & 0xff) / 255.0, (rgb & 0xff) / 255.0};
}

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

using Surface = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using Context = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

Context contextOn(cairo_surface_t* surface) {
  Context cr(cairo_create(surface), cairo_destroy);
  cairo_select_font_face(cr.get(), "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr.get(), kFontSize);
  return cr;
}

// A long token is cut (at a UTF-8 character boundary) so one word cannot push the grid away.
std::string shortened(const std::string& token) {
  if (token.size() <= kMaxTokenBytes)
    return token;
  size_t end = kMaxTokenBytes;
  while (end > 0 && (static_cast<unsigned char>(token[end]) & 0xc0) == 0x80)
    --end;
  return token.substr(0, end) + "\u2026";
}

// Every label when a cell is tall enough for text; otherwise every step-th, the step from 1, 2,
// 5, 10, … so that labels sit at least a line apart.
int64_t labelStep(double cell) {
  for (int64_t decade = 1;; decade *= 10)
    for (int64_t step : {1, 2, 5})
      if (step * decade * cell >= kFontSize + 1)
        return step * decade;
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

double textWidth(cairo_t* cr, const std::string& text) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, text.c_str(), &e);
  return e.x_advance;
}

double widestLabel(cairo_t* cr, const std::vector<std::pair<int64_t, std::string>>& labels) {
  double widest = 0;
  for (const auto& [k, text] : labels)
    widest = std::max(widest, textWidth(cr, text));
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

Geometry measure(const Heatmap& map) {
  Surface scratch(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1), cairo_surface_destroy);
  Context cr = contextOn(scratch.get());
  Geometry g;
  HeatmapLayout& l = g.layout;
  l.cell = std::clamp(std::floor(720.0 / static_cast<double>(std::max(map.rows, map.columns))),
                      1.0, 28.0);
  g.rowLabels = axisLabels(map.rowAxis, map.rows, l.cell);
  g.columnLabels = axisLabels(map.columnAxis, map.columns, l.cell);
  l.left = std::ceil(kMargin + kAxisTitleHeight + widestLabel(cr.get(), g.rowLabels) + kGap);
  l.top = std::ceil(kMargin + kTitleHeight + kAxisTitleHeight +
                    widestLabel(cr.get(), g.columnLabels) + kGap);
  const double gridWidth = l.cell * static_cast<double>(map.columns);
  const double gridHeight = l.cell * static_cast<double>(map.rows);
  g.barHeight = std::max(gridHeight, kMinBarHeight);
  double barText = textWidth(cr.get(), "masked");
  for (const std::string& text : barLabels(largestKept(map)))
    barText = std::max(barText, textWidth(cr.get(), text));
  const double barRight = l.left + gridWidth + kBarGap + kBarWidth + kGap + barText;
  l.width = std::ceil(std::max(barRight, 2 * kMargin + textWidth(cr.get(), map.title)) + kMargin);
  l.height = std::ceil(l.top + g.barHeight + kLegendHeight + kMargin);
  return g;
}

void fill(cairo_t* cr, Rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

void drawCells(cairo_t* cr, const Heatmap& map, const HeatmapLayout& l) {
  const double largest = largestKept(map);
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE); // cells on whole pixels: no seams between them
  for (int64_t r = 0; r < map.rows; ++r)
    for (int64_t c = 0; c < map.columns; ++c) {
      const size_t k = static_cast<size_t>(r * map.columns + c);
      fill(cr, map.kept[k] ? heatColor(map.values[k] / largest) : maskedColor());
      cairo_rectangle(cr, l.left + static_cast<double>(c) * l.cell,
                      l.top + static_cast<double>(r) * l.cell, l.cell, l.cell);
      cairo_fill(cr);
    }
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);
}

void drawAxes(cairo_t* cr, const Heatmap& map, const Geometry& g) {
  const HeatmapLayout& l = g.layout;
  cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
  const double halfLine = kFontSize * 0.35; // from a label's baseline to its middle
  for (const auto& [r, text] : g.rowLabels) {
    cairo_move_to(cr, l.left - kGap - textWidth(cr, text),
                  l.top + (static_cast<double>(r) + 0.5) * l.cell + halfLine);
    cairo_show_text(cr, text.c_str());
  }
  for (const auto& [c, text] : g.columnLabels) {
    cairo_save(cr);
    cairo_move_to(cr, l.left + (static_cast<double>(c) + 0.5) * l.cell + halfLine, l.top - kGap);
    cairo_rotate(cr, -M_PI / 2);
    cairo_show_text(cr, text.c_str());
    cairo_restore(cr);
  }
  cairo_move_to(cr, l.left, kMargin + kTitleHeight + kFontSize);
  cairo_show_text(cr, (map.columnAxis.title + " \u2192").c_str());
  // Read upwards, as y-axis titles are, with the arrow at the bottom pointing down the rows.
  const std::string rowTitle = "\u2190 " + map.rowAxis.title;
  cairo_save(cr);
  cairo_move_to(cr, kMargin + kFontSize, l.top + textWidth(cr, rowTitle));
  cairo_rotate(cr, -M_PI / 2);
  cairo_show_text(cr, rowTitle.c_str());
  cairo_restore(cr);

  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_move_to(cr, kMargin, kMargin + kFontSize);
  cairo_show_text(cr, map.title.c_str());
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
}

// The colour bar from 0 (bottom) to the largest kept weight (top), and the masked legend.
void drawColourBar(cairo_t* cr, const Heatmap& map, const Geometry& g) {
  const HeatmapLayout& l = g.layout;
  const double x = l.left + l.cell * static_cast<double>(map.columns) + kBarGap;
  const double bottom = l.top + g.barHeight;
  std::unique_ptr<cairo_pattern_t, decltype(&cairo_pattern_destroy)> gradient(
      cairo_pattern_create_linear(0, bottom, 0, l.top), cairo_pattern_destroy);
  for (size_t k = 0; k < kViridis.size(); ++k) {
    const Rgb c = unpack(kViridis[k]);
    cairo_pattern_add_color_stop_rgb(gradient.get(),
                                     static_cast<double>(k) / (kViridis.size() - 1), c.r, c.g, c.b);
  }
  cairo_set_source(cr, gradient.get());
  cairo_rectangle(cr, x, l.top, kBarWidth, g.barHeight);
  cairo_fill(cr);

  cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
  const std::vector<std::string> labels = barLabels(largestKept(map));
  for (size_t k = 0; k < labels.size(); ++k) {
    const double y = l.top + g.barHeight * static_cast<double>(k) / (labels.size() - 1);
    cairo_move_to(cr, x + kBarWidth + kGap, y + kFontSize * 0.35);
    cairo_show_text(cr, labels[k].c_str());
  }
  if (std::find(map.kept.begin(), map.kept.end(), 0) != map.kept.end()) {
    fill(cr, maskedColor());
    cairo_rectangle(cr, x, bottom + kGap + 2, kBarWidth, kBarWidth);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    cairo_move_to(cr, x + kBarWidth + kGap, bottom + kGap + 2 + kBarWidth - 3);
    cairo_show_text(cr, "masked");
  }
}

void draw(cairo_t* cr, const Heatmap& map, const Geometry& g) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  drawCells(cr, map, g.layout);
  drawAxes(cr, map, g);
  drawColourBar(cr, map, g);
}

} // namespace

Rgb heatColor(double t) {
  const double x = std::clamp(t, 0.0, 1.0) * (kViridis.size() - 1);
  const size_t k = std::min(static_cast<size_t>(x), kViridis.size() - 2);
  const double f = x - static_cast<double>(k);
  const Rgb a = unpack(kViridis[k]), b = unpack(kViridis[k + 1]);
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

Rgb maskedColor() { return {0.86, 0.86, 0.86}; }

HeatmapLayout heatmapLayout(const Heatmap& map) { return measure(map).layout; }

void writeHeatmap(const Heatmap& map, const std::filesystem::path& path) {
  const std::string extension = path.extension().string();
  if (extension != ".png" && extension != ".svg")
    throw UsageError("-o " + path.string() + ": the image must be .png or .svg");
  const Geometry g = measure(map);
  // Drawn into memory, then written whole: a failure leaves no partial image.
  std::string image;
  const cairo_write_func_t append = [](void* closure, const unsigned char* data,
                                       unsigned int length) {
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
  };
  cairo_status_t status;
  if (extension == ".svg") {
    Surface surface(
        cairo_svg_surface_create_for_stream(append, &image, g.layout.width, g.layout.height),
        cairo_surface_destroy);
    draw(contextOn(surface.get()).get(), map, g);
    cairo_surface_finish(surface.get());
    status = cairo_surface_status(surface.get());
  } else {
    Surface surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24,
                                               static_cast<int>(g.layout.width),
                                               static_cast<int>(g.layout.height)),
                    cairo_surface_destroy);
    draw(contextOn(surface.get()).get(), map, g);
    status = cairo_surface_write_to_png_stream(surface.get(), append, &image);
  }
  if (status != CAIRO_STATUS_SUCCESS)
    throw JobError("-o " + path.string() + ": cannot draw it (" + cairo_status_to_string(status) +
                   ")");
  writeFileAtomically(path, image);
}

} // namespace attnc::tools
