// attnc viz: a matrix of attention weights drawn as a heatmap, rows the queries and columns the
// keys, as PNG or SVG on a Plot.h canvas (one drawing for both formats, text included).
#ifndef ATTNC_TOOLS_ATTNC_HEATMAP_H
#define ATTNC_TOOLS_ATTNC_HEATMAP_H

#include "Plot.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace attnc::tools {

struct HeatmapAxis {
  std::string title;               // "queries", "keys"
  int64_t first = 0;               // the position of the first row or column, for index labels
  std::vector<std::string> tokens; // one per row or column; empty: positions label the axis
};

struct Heatmap {
  std::string title;
  int64_t rows = 0, columns = 0;
  std::vector<double> values; // rows × columns, row-major
  std::vector<uint8_t> kept;  // 0 where the masks remove the score: drawn gray, not as a weight
  HeatmapAxis rowAxis, columnAxis;
};

// The most cells drawn along an axis: past it a cell is under one pixel and the SVG explodes.
inline constexpr int64_t kMaxHeatmapCells = 512;

// Viridis at t in [0, 1] (clamped): perceptually uniform and readable in grey and by people
// with the common colour-vision deficiencies.
Rgb heatColor(double t);
// The colour of a masked cell.
Rgb maskedColor();

// Where the cells land in the image, in pixels.
struct HeatmapLayout {
  double width, height; // the image
  double left, top;     // the first cell's corner
  double cell;          // a cell's side
};
HeatmapLayout heatmapLayout(const Heatmap& map);

// Colours run from 0 to the largest kept value (weights rarely reach 1, and a fixed scale would
// leave long rows nearly black). Writes PNG or SVG by the path's extension (UsageError for
// another), beside the target then renamed into place, so a failure leaves no partial file.
void writeHeatmap(const Heatmap& map, const std::filesystem::path& path);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_HEATMAP_H
