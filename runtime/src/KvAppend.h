// The step's new keys and values written into a KV cache before the kernel runs (kv_append).
#ifndef ATTNC_RUNTIME_KVAPPEND_H
#define ATTNC_RUNTIME_KVAPPEND_H

#include "KvCacheCheck.h"
#include "RuntimeManifest.h"

#include <optional>
#include <string>
#include <vector>

namespace attnc::runtime {

// Writes row i of sequence b of k_new and v_new at the cache's position
// seq_lens[b] - rows_b + i (the query rows' positions: seq_lens counts the new rows), for every
// KV head: k_new rotated there by RoPE when the manifest says so, each row rounded to the
// cache's dtype, or for an int8 or fp8_e4m3 cache quantized (attnc/QuantizedRows.hpp: codes of
// x / scale with scale = max|x| / 127 or 448, an f32 per position and KV head, 0 for a zero
// row, NaN with codes 0 for a row holding NaN or ±inf). rows_b is Tq, or a ragged batch's
// offsets[b + 1] - offsets[b]. Host tensors, already checked against the manifest; `cache`, the
// lengths and block table checkKvCache read. Returns the first problem (a sequence holding
// fewer keys than its new rows), before writing anything.
std::optional<std::string> appendNewRows(const RuntimeManifest& manifest,
                                         const std::vector<DLTensor*>& tensors,
                                         const RunSizes& sizes, const CacheIndices& cache,
                                         const std::vector<int64_t>& offsets);

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_KVAPPEND_H
