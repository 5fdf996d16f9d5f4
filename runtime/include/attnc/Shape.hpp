// Symbolic tensor dimensions of a manifest argument.
//
// A dimension is a constant ("64"), a run-time size ("B", "Tq", "Tk", "pages": a paged KV
// cache's page count, "total_q": the query rows of a ragged batch), a ceiling division of one
// ("ceil(Tq/64)", the number of 64-row blocks), an exact one ("Tk/16": a block table's pages per
// sequence, which binds Tk = 16 x extent), or one more than a size ("B+1": a ragged batch's row
// offsets, which binds B = extent - 1).
// A trailing "|1" marks a dimension that may also be 1 and is then broadcast ("B|1" for a mask
// shared by the whole batch). The compiler writes these strings and the runtime evaluates them,
// both through this header.
#ifndef ATTNC_SHAPE_HPP
#define ATTNC_SHAPE_HPP

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attnc {

enum class SizeSymbol { Batch, SeqQ, SeqK, Pages, QueryRows };

inline constexpr std::string_view kSizeSymbolNames[] = {"B", "Tq", "Tk", "pages", "total_q"};
inline constexpr int kSizeSymbols = 5;

inline std::optional<SizeSymbol> parseSizeSymbol(std::string_view text) {
  for (int s = 0; s < kSizeSymbols; ++s)
    if (kSizeSymbolNames[s] == text)
      return static_cast<SizeSymbol>(s);
  return std::nullopt;
}

// The run-time sizes; 0 while not yet bound.
struct RunSizes {
  int64_t value[kSizeSymbols] = {0, 0, 0, 0, 0};
  int64_t& operator[](SizeSymbol s) { return value[static_cast<int>(s)]; }
  int64_t operator[](SizeSymbol s) const { return value[static_cast<int>(s)]; }
};

struct DimExpr {
  std::optional<SizeSymbol> symbol; // empty: a constant
  int64_t value = 0;                // the constant, or the divisor of a division (1: plain symbol)
  bool broadcastable = false;
  bool exact = false; // symbol / value with the symbol a multiple of value, else its ceiling
  int64_t plus = 0;   // added to a plain symbol: "B+1"

  static DimExpr constant(int64_t v) { return {std::nullopt, v, false, false, 0}; }
  static DimExpr of(SizeSymbol s) { return {s, 1, false, false, 0}; }
  static DimExpr ceilDiv(SizeSymbol s, int64_t d) { return {s, d, false, false, 0}; }
  static DimExpr exactDiv(SizeSymbol s, int64_t d) { return {s, d, false, true, 0}; }
  static DimExpr plusConstant(SizeSymbol s, int64_t n) { return {s, 1, false, false, n}; }
  DimExpr orOne() const {
    DimExpr e = *this;
    e.broadcastable = true;
    return e;
  }
  // A plain symbol, an exact division or a symbol plus a constant, which binds a run-time size
  // from the first tensor that has it.
  bool binds() const { return symbol && (value == 1 || exact) && !broadcastable; }
  // The size an extent of this dimension binds its symbol to (extent x divisor, or extent -
  // plus), or empty when that overflows or leaves no size of at least 1.
  std::optional<int64_t> boundSize(int64_t extent) const {
    if (plus != 0)
      return extent - plus >= 1 ? std::optional<int64_t>(extent - plus) : std::nullopt;
    if (extent > INT64_MAX / value)
      return std::nullopt;
    return extent * value;
  }

  // Empty while a symbol it needs is not bound yet, or when an exact division does not divide.
  std::optional<int64_t> evaluate(const RunSizes& sizes) const {
    if (!symbol)
      return value;
    int64_t s = sizes[*symbol];
    if (s == 0 || (exact && s % value != 0) || s > INT64_MAX - plus)
      return std::nullopt;
    if (plus != 0)
      return s + plus;
    return s / value + (s % value != 0); // ceil(s / value), without overflowing s + value - 1
  }

  std::string str() const {
    std::string text;
    const std::string name(kSizeSymbolNames[static_cast<int>(symbol.value_or(SizeSymbol::Batch))]);
    if (!symbol)
      text = std::to_string(value);
    else if (plus != 0)
      text = name + "+" + std::to_string(plus);
    else if (value == 1)
      text = name;
    else if (exact)
      text = name + "/" + std::to_string(value);
    else
      text = "ceil(" + name + "/" + std::to_string(value) + ")";
    return broadcastable ? text + "|1" : text;
  }

  static std::optional<DimExpr> parse(std::string_view text) {
    DimExpr e;
    if (text.ends_with("|1")) {
      e.broadcastable = true;
      text.remove_suffix(2);
    }
    auto parseInt = [](std::string_view digits) -> std::optional<int64_t> {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc() || end != digits.data() + digits.size() || v < 1)
        return std::nullopt;
      return v;
    };
    if (auto symbol = parseSizeSymbol(text)) {
      e.symbol = symbol;
      e.value = 1;
      return e;
    }
    // "S+N".
    if (std::size_t at = text.find('+'); at != std::string_view::npos) {
      auto symbol = parseSizeSymbol(text.substr(0, at));
      auto addend = parseInt(text.substr(at + 1));
      if (!symbol || !addend || e.broadcastable)
        return std::nullopt;
      return plusConstant(*symbol, *addend);
    }
    // "S/N" (exact) or "ceil(S/N)".
    auto division = [&](std::string_view inner, bool exact) -> std::optional<DimExpr> {
      std::size_t slash = inner.find('/');
      if (slash == std::string_view::npos)
        return std::nullopt;
      auto symbol = parseSizeSymbol(inner.substr(0, slash));
      auto divisor = parseInt(inner.substr(slash + 1));
      if (!symbol || !divisor)
        return std::nullopt;
      e.symbol = symbol;
      e.value = *divisor;
      e.exact = exact;
      return e;
    };
    if (text.starts_with("ceil(") && text.ends_with(")"))
      return division(text.substr(5, text.size() - 6), /*exact=*/false);
    if (text.find('/') != std::string_view::npos)
      return division(text, /*exact=*/true);
    auto v = parseInt(text);
    if (!v)
      return std::nullopt;
    e.value = *v;
    return e;
  }
};

} // namespace attnc

#endif // ATTNC_SHAPE_HPP
