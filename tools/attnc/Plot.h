// Drawing for attnc's pictures (viz's heatmap, tune --report's plot): a canvas over a cairo
// surface with the few primitives they need, written as PNG or SVG by the path's extension, and
// a log-scaled axis. Coordinates are pixels, y pointing down.
#ifndef ATTNC_TOOLS_ATTNC_PLOT_H
#define ATTNC_TOOLS_ATTNC_PLOT_H

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attnc::tools {

struct Rgb {
  double r, g, b; // in [0, 1]
};

// 0xRRGGBB, as CSS writes colours.
constexpr Rgb hexColor(uint32_t rgb) {
  return {((rgb >> 16) & 0xff) / 255.0, ((rgb >> 8) & 0xff) / 255.0, (rgb & 0xff) / 255.0};
}

struct Point {
  double x, y;
};

struct Stroke {
  Rgb color;
  double width = 1;
};

// Where a text's anchor point lies along it.
enum class Align { Start, Middle, End };

struct TextStyle {
  double size = 12;
  Rgb color = {0, 0, 0};
  Align align = Align::Start;
  // The anchor at the middle of the lowercase letters (0.35 em above the baseline), so that a
  // label centres on a row, a tick or a legend swatch; otherwise on the baseline.
  bool centred = false;
  bool bold = false;
  double angle = 0; // radians about the anchor; -pi/2 reads upwards
};

// The advance of `text` in `style` (its size and weight), for laying out before drawing.
double textWidth(const std::string& text, const TextStyle& style);

// A white picture to be written to `path`: PNG when it ends in .png, SVG when in .svg (vector
// shapes and glyph outlines, in pixel units). Drawn in memory; write() puts it beside `path`
// and renames it into place, so a failure leaves no partial file.
class Canvas {
public:
  // `option` names where the path came from ("-o", "--report") in error messages. Throws
  // UsageError for another extension, before anything is drawn.
  Canvas(std::string option, const std::filesystem::path& path, double width, double height);
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  void rectangle(Point corner, double width, double height, Rgb fill);
  // A rectangle whose colour runs from bottomToTop.front() at its bottom edge to .back() at its
  // top, through the others at even steps, interpolated in RGB.
  void verticalGradient(Point corner, double width, double height,
                        std::span<const Rgb> bottomToTop);
  void line(Point from, Point to, Stroke stroke);
  void polyline(std::span<const Point> points, Stroke stroke);
  void circle(Point centre, double radius, Rgb fill, double opacity = 1);
  // An x-shaped marker: the diagonals of the square of side 2 * halfSide about `centre`.
  void cross(Point centre, double halfSide, Stroke stroke);
  void text(Point anchor, const std::string& text, const TextStyle& style);

  // Finishes the picture and writes it (see the class). Throws JobError when cairo fails, and
  // what StagedFile throws when the file cannot be written.
  void write();

private:
  struct Cairo; // the surface and its context, kept out of this header (and its users)
  std::string option_;
  std::filesystem::path path_;
  std::unique_ptr<Cairo> cairo_;
};

// A vertical axis on a log scale, for quantities that vary by factors: `lo` at pixel `bottom`,
// `hi` at `top`, values outside clamped to the ends.
struct LogAxis {
  double lo, hi;
  double top, bottom;

  // bottom - (bottom - top) * log(value / lo) / log(hi / lo).
  double y(double value) const;
  // The round numbers (see roundNumberAtLeast) within [lo, hi]; lo and hi when fewer than two.
  std::vector<double> ticks() const;
};

// Gridlines at the axis's ticks from `left` to `right`, their values left of `left`, and the
// axis line at `left`.
void drawLogAxis(Canvas& canvas, const LogAxis& axis, double left, double right);

// The smallest of 1, 2 and 5 times a power of ten that is at least `x` > 0: the steps a reader
// counts in without arithmetic.
double roundNumberAtLeast(double x);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_PLOT_H
