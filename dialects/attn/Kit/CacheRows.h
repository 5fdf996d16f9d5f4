//===- CacheRows.h - reading a KV cache's rows ----------------------------===//
//
// A KV cache as every kernel that reads one sees it (the gather of GatherCache, the CPU decode
// kernel, the tensor-core kernels): rows [B, H_kv, Tk, d] (contiguous) or [pages, H_kv,
// page_size, d] through a block table [B, pages of a sequence] (paged), of values or of int8 /
// fp8 E4M3 codes with a scale per row [B or pages, H_kv, Tk or page_size] (quantized).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_KIT_CACHEROWS_H
#define ATTNC_DIALECTS_ATTN_KIT_CACHEROWS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <utility>

namespace attnc::attn {

class CacheRows {
public:
  // The cache whose rows are `rows` (K's or V's: they share their pages), paged through `table`
  // when it is not null. A paged cache's last page, where `place` clamps the table's entries,
  // is built at b.
  CacheRows(mlir::ImplicitLocOpBuilder& b, mlir::Value rows, mlir::Value table);

  // Tk: the rows' third dim, or the table's width times the page size.
  static mlir::Value keys(mlir::ImplicitLocOpBuilder& b, mlir::Value rows, mlir::Value table);

  // Where key `key` of sequence `sequence` lies: the first and third of the rows' indices
  // [outer, head, row, column]: (sequence, key), or in a paged cache (page, key mod page_size),
  // page = block_table[sequence, key / page_size] clamped into the cache. The decode kernels
  // read a key past the sequence's end from whatever page its entry names (the runtime checked
  // only the entries below seq_lens) and drop or zero it.
  std::pair<mlir::Value, mlir::Value> place(mlir::ImplicitLocOpBuilder& b, mlir::Value sequence,
                                            mlir::Value key) const;

  // A quantized row's scale (scales[outer, head, row]) times the factor toF32Unscaled leaves
  // out of its codes (Elements.h): what the row's unscaled elements are multiplied by.
  static mlir::Value rowScale(mlir::ImplicitLocOpBuilder& b, mlir::Value scales, mlir::Value codes,
                              mlir::Value outer, mlir::Value head, mlir::Value row);

private:
  mlir::Value table, lastPage;
  int64_t pageSize;
};

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_CACHEROWS_H
