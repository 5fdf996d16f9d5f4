#include "Heatmap.h"

#include "Support/Errors.h"

#include <cairo.h>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>

namespace attnc::tools {
namespace {

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("attnc_heatmap_test_" + name);
}

// Whether a StagedFile temporary (".NAME.XXXXXX") is left beside `path`.
bool leftTemporaries(const std::filesystem::path& path) {
  const std::string prefix = "." + path.filename().string() + ".";
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path()))
    if (entry.path().filename().string().starts_with(prefix))
      return true;
  return false;
}

// A 5 × 7 map with a causal-looking mask, values rising along each row.
Heatmap sampleMap() {
  Heatmap map;
  map.title = "sample";
  map.rows = 5;
  map.columns = 7;
  for (int64_t r = 0; r < map.rows; ++r)
    for (int64_t c = 0; c < map.columns; ++c) {
      map.values.push_back(0.02 * static_cast<double>(r * map.columns + c));
      map.kept.push_back(c <= r + 2);
    }
  map.rowAxis = {"queries", 3, {}};
  map.columnAxis = {"keys", 0, {"a", "b", "c", "d", "e", "f", "a-very-long-token-indeed"}};
  return map;
}

// The RGB of pixel (x, y) of a PNG, each in [0, 1].
Rgb pixelOf(cairo_surface_t* image, double x, double y) {
  const unsigned char* data = cairo_image_surface_get_data(image);
  const int stride = cairo_image_surface_get_stride(image);
  uint32_t argb;
  std::memcpy(&argb, data + static_cast<int>(y) * stride + static_cast<int>(x) * 4, 4);
  return {((argb >> 16) & 0xff) / 255.0, ((argb >> 8) & 0xff) / 255.0, (argb & 0xff) / 255.0};
}

TEST(Heatmap, EachCellHasTheColourOfItsWeightOrOfTheMask) {
  const Heatmap map = sampleMap();
  const auto path = scratch("cells.png");
  writeHeatmap(map, path);
  cairo_surface_t* image = cairo_image_surface_create_from_png(path.c_str());
  ASSERT_EQ(cairo_surface_status(image), CAIRO_STATUS_SUCCESS);
  const HeatmapLayout l = heatmapLayout(map);
  EXPECT_EQ(cairo_image_surface_get_width(image), static_cast<int>(l.width));
  EXPECT_EQ(cairo_image_surface_get_height(image), static_cast<int>(l.height));
  double largest = 0;
  for (size_t k = 0; k < map.values.size(); ++k)
    if (map.kept[k])
      largest = std::max(largest, map.values[k]);
  for (int64_t r = 0; r < map.rows; ++r)
    for (int64_t c = 0; c < map.columns; ++c) {
      const size_t k = static_cast<size_t>(r * map.columns + c);
      const Rgb want = map.kept[k] ? heatColor(map.values[k] / largest) : maskedColor();
      const Rgb got = pixelOf(image, l.left + (static_cast<double>(c) + 0.5) * l.cell,
                              l.top + (static_cast<double>(r) + 0.5) * l.cell);
      SCOPED_TRACE("cell " + std::to_string(r) + "," + std::to_string(c));
      EXPECT_NEAR(got.r, want.r, 1.0 / 255);
      EXPECT_NEAR(got.g, want.g, 1.0 / 255);
      EXPECT_NEAR(got.b, want.b, 1.0 / 255);
    }
  cairo_surface_destroy(image);
  std::filesystem::remove(path);
}

TEST(Heatmap, ColoursRunFromDarkToLight) {
  auto luminance = [](Rgb c) { return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b; };
  for (double t = 0; t < 1; t += 0.05)
    EXPECT_LT(luminance(heatColor(t)), luminance(heatColor(t + 0.05)));
}

TEST(Heatmap, WritesSvg) {
  const auto path = scratch("map.svg");
  writeHeatmap(sampleMap(), path);
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_GT(std::filesystem::file_size(path), 1000u);
  EXPECT_FALSE(leftTemporaries(path));
  std::filesystem::remove(path);
}

TEST(Heatmap, RefusesOtherFormatsAndUnwritablePathsWithoutLeavingFiles) {
  const auto jpeg = scratch("map.jpg");
  EXPECT_THROW(writeHeatmap(sampleMap(), jpeg), UsageError);
  EXPECT_FALSE(std::filesystem::exists(jpeg));
  const auto missingDir = scratch("no-such-dir") / "map.png";
  EXPECT_THROW(writeHeatmap(sampleMap(), missingDir), UsageError);
  EXPECT_FALSE(std::filesystem::exists(missingDir.parent_path()));
}

} // namespace
} // namespace attnc::tools
