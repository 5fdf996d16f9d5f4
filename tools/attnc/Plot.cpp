// The canvas of Plot.h on cairo: an image surface encoded as PNG, or an SVG surface, either
// streamed into memory and written whole; and the log axis.
#include "Plot.h"

#include "OutputFile.h"
#include "Support/Errors.h"

#include <algorithm>
#include <cairo-svg.h>
#include <cairo.h>
#include <cmath>
#include <fmt/core.h>

namespace attnc::tools {
namespace {

// From the baseline up to the middle of the lowercase letters, in ems.
constexpr double kHalfXHeight = 0.35;

using SurfacePtr = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using ContextPtr = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

void selectFont(cairo_t* cr, const TextStyle& style) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         style.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, style.size);
}

double advanceOf(cairo_t* cr, const std::string& text) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  return extents.x_advance;
}

cairo_status_t appendTo(void* image, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(image)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

// At most two significant digits, without an exponent or trailing zeros: 0.005, 0.1, 2, 20, and
// 0.043 for an axis end that is not a round number.
std::string tickLabel(double value) {
  const int decimals = std::max(0, 1 - static_cast<int>(std::floor(std::log10(value))));
  std::string text = fmt::format("{:.{}f}", value, decimals);
  if (decimals > 0)
    text.erase(text.find_last_not_of(".0") + 1);
  return text;
}

} // namespace

double textWidth(const std::string& text, const TextStyle& style) {
  SurfacePtr scratch(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1), cairo_surface_destroy);
  ContextPtr cr(cairo_create(scratch.get()), cairo_destroy);
  selectFont(cr.get(), style);
  return advanceOf(cr.get(), text);
}

// Members in this order so that the context goes first, then the surface (an SVG surface writes
// into `image` as it is destroyed), then `image`.
struct Canvas::Cairo {
  bool svg;
  std::string image;
  SurfacePtr surface{nullptr, cairo_surface_destroy};
  ContextPtr cr{nullptr, cairo_destroy};
};

Canvas::Canvas(std::string option, const std::filesystem::path& path, double width,
               double height)
    : option_(std::move(option)), path_(path), cairo_(std::make_unique<Cairo>()) {
  const std::string extension = path.extension().string();
  if (extension != ".png" && extension != ".svg")
    throw UsageError(option_ + " " + path.string() + ": the image must be .png or .svg");
  Cairo& s = *cairo_;
  s.svg = extension == ".svg";
  if (s.svg) {
    s.surface.reset(cairo_svg_surface_create_for_stream(appendTo, &s.image, width, height));
    cairo_svg_surface_set_document_unit(s.surface.get(), CAIRO_SVG_UNIT_PX);
  } else {
    s.surface.reset(cairo_image_surface_create(CAIRO_FORMAT_RGB24,
                                               static_cast<int>(std::ceil(width)),
                                               static_cast<int>(std::ceil(height))));
  }
  s.cr.reset(cairo_create(s.surface.get()));
  cairo_set_source_rgb(s.cr.get(), 1, 1, 1);
  cairo_paint(s.cr.get());
}

Canvas::~Canvas() = default;

void Canvas::rectangle(Point corner, double width, double height, Rgb fill) {
  cairo_t* cr = cairo_->cr.get();
  cairo_set_source_rgb(cr, fill.r, fill.g, fill.b);
  cairo_rectangle(cr, corner.x, corner.y, width, height);
  cairo_fill(cr);
}

void Canvas::verticalGradient(Point corner, double width, double height,
                              std::span<const Rgb> bottomToTop) {
  cairo_t* cr = cairo_->cr.get();
  std::unique_ptr<cairo_pattern_t, decltype(&cairo_pattern_destroy)> gradient(
      cairo_pattern_create_linear(0, corner.y + height, 0, corner.y), cairo_pattern_destroy);
  const double lastStop = static_cast<double>(bottomToTop.size() - 1);
  for (size_t k = 0; k < bottomToTop.size(); ++k) {
    const Rgb& c = bottomToTop[k];
    cairo_pattern_add_color_stop_rgb(gradient.get(), static_cast<double>(k) / lastStop, c.r, c.g,
                                     c.b);
  }
  cairo_set_source(cr, gradient.get());
  cairo_rectangle(cr, corner.x, corner.y, width, height);
  cairo_fill(cr);
}

void Canvas::line(Point from, Point to, Stroke stroke) {
  const Point ends[] = {from, to};
  polyline(ends, stroke);
}

void Canvas::polyline(std::span<const Point> points, Stroke stroke) {
  cairo_t* cr = cairo_->cr.get();
  for (const Point& p : points)
    cairo_line_to(cr, p.x, p.y); // with no current point, the first moves there
  cairo_set_source_rgb(cr, stroke.color.r, stroke.color.g, stroke.color.b);
  cairo_set_line_width(cr, stroke.width);
  cairo_stroke(cr);
}

void Canvas::circle(Point centre, double radius, Rgb fill, double opacity) {
  cairo_t* cr = cairo_->cr.get();
  cairo_arc(cr, centre.x, centre.y, radius, 0, 2 * M_PI);
  cairo_set_source_rgba(cr, fill.r, fill.g, fill.b, opacity);
  cairo_fill(cr);
}

void Canvas::cross(Point centre, double halfSide, Stroke stroke) {
  cairo_t* cr = cairo_->cr.get();
  cairo_move_to(cr, centre.x - halfSide, centre.y - halfSide);
  cairo_line_to(cr, centre.x + halfSide, centre.y + halfSide);
  cairo_move_to(cr, centre.x + halfSide, centre.y - halfSide);
  cairo_line_to(cr, centre.x - halfSide, centre.y + halfSide);
  cairo_set_source_rgb(cr, stroke.color.r, stroke.color.g, stroke.color.b);
  cairo_set_line_width(cr, stroke.width);
  cairo_stroke(cr);
}

void Canvas::text(Point anchor, const std::string& text, const TextStyle& style) {
  cairo_t* cr = cairo_->cr.get();
  selectFont(cr, style);
  cairo_set_source_rgb(cr, style.color.r, style.color.g, style.color.b);
  // In the text's own frame (x along it, y down across it), the anchor at the origin.
  const double width = advanceOf(cr, text);
  const double along = style.align == Align::Start    ? 0
                       : style.align == Align::Middle ? -width / 2
                                                      : -width;
  cairo_save(cr);
  cairo_translate(cr, anchor.x, anchor.y);
  cairo_rotate(cr, style.angle);
  cairo_move_to(cr, along, style.centred ? kHalfXHeight * style.size : 0);
  cairo_show_text(cr, text.c_str());
  cairo_new_path(cr); // drops the current point show_text leaves, so no shape starts from it
  cairo_restore(cr);
}

void Canvas::write() {
  Cairo& s = *cairo_;
  cairo_status_t status = cairo_status(s.cr.get());
  if (status == CAIRO_STATUS_SUCCESS && s.svg) {
    cairo_surface_finish(s.surface.get());
    status = cairo_surface_status(s.surface.get());
  } else if (status == CAIRO_STATUS_SUCCESS) {
    status = cairo_surface_write_to_png_stream(s.surface.get(), appendTo, &s.image);
  }
  if (status != CAIRO_STATUS_SUCCESS)
    throw JobError(option_ + " " + path_.string() + ": cannot draw it (" +
                   cairo_status_to_string(status) + ")");
  writeFileAtomically(path_, s.image);
}

double LogAxis::y(double value) const {
  const double t = std::log(std::clamp(value, lo, hi) / lo) / std::log(hi / lo);
  return bottom - t * (bottom - top);
}

std::vector<double> LogAxis::ticks() const {
  std::vector<double> out;
  // The next round number after r is 2r or 2.5r, so 1.5r lies strictly between them.
  for (double r = roundNumberAtLeast(lo); r <= hi; r = roundNumberAtLeast(1.5 * r))
    out.push_back(r);
  if (out.size() < 2)
    out = {lo, hi};
  return out;
}

void drawLogAxis(Canvas& canvas, const LogAxis& axis, double left, double right) {
  constexpr Rgb kGridline = hexColor(0xeeeeee), kAxisLine = hexColor(0x333333);
  for (double tick : axis.ticks()) {
    canvas.line({left, axis.y(tick)}, {right, axis.y(tick)}, {kGridline});
    canvas.text({left - 4, axis.y(tick)}, tickLabel(tick),
                {.size = 10, .align = Align::End, .centred = true});
  }
  canvas.line({left, axis.top}, {left, axis.bottom}, {kAxisLine});
}

double roundNumberAtLeast(double x) {
  const double decade = std::pow(10, std::floor(std::log10(x)));
  for (double step : {1.0, 2.0, 5.0})
    if (step * decade >= x)
      return step * decade;
  return 10 * decade;
}

} // namespace attnc::tools
