//===- CacheRows.h - reading a KV cache's rows ----------------------------===//
//
// Where a key's row lies in a KV cache: contiguous ([B, H_kv, Tk, d]) or paged through a block
// table ([pages, H_kv, page_size, d]). Elements.h widens the rows' int8 or fp8 codes.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_KIT_CACHEROWS_H
#define ATTNC_DIALECTS_ATTN_KIT_CACHEROWS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include <utility>

namespace attnc::attn {

// Tk of a KV cache whose rows are `rows` ([B or pages, H_kv, Tk or page_size, d]): its third
// dim, or with a block table the table's width times the page size.
mlir::Value cacheKeys(mlir::ImplicitLocOpBuilder& b, mlir::Value rows, mlir::Value table);
// A paged cache's last page, where pagedRow clamps block-table entries: its rows' (`rows`,
// [pages, H_kv, page_size, d]) first dim minus one.
mlir::Value cacheLastPage(mlir::ImplicitLocOpBuilder& b, mlir::Value rows);
// Where key `key` of sequence `sequence` lies in a paged cache of `pageSize` rows a page:
// (page, row) = (block_table[sequence, key / page_size] clamped into [0, lastPage],
// key mod page_size). The decode kernels read a key past the sequence's end from whatever page
// its entry names (the runtime checked only the entries below seq_lens) and drop or zero it.
std::pair<mlir::Value, mlir::Value> pagedRow(mlir::ImplicitLocOpBuilder& b, mlir::Value table,
                                             mlir::Value sequence, mlir::Value key,
                                             int64_t pageSize, mlir::Value lastPage);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_CACHEROWS_H
