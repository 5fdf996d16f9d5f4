// The run-time checks of a KV cache's index tensors, before any kernel reads through them.
#ifndef ATTNC_RUNTIME_KVCACHECHECK_H
#define ATTNC_RUNTIME_KVCACHECHECK_H

#include "RuntimeManifest.h"

#include <optional>
#include <string>
#include <vector>

namespace attnc::runtime {

// A KV cache's index tensors as the check read them (on the host), for the runtime's own use
// after it (kv_append's writes): seq_lens, and a paged cache's block table, row-major.
struct CacheIndices {
  std::vector<int32_t> lengths;
  std::vector<int32_t> blockTable;
  int64_t pagesPerSequence = 0;
};

// For a bundle with a KV cache (a `seq_lens` argument; docs/spec.md, "KV caches"): every
// seq_lens[b] in [0, Tk], and every block_table entry a sequence's keys use ([b, p] for
// p < ceil(seq_lens[b] / page_size)) naming a page of k_pages; the entries past a sequence's
// end are not read, so they may hold anything (vLLM pads with -1 or 0). O(B + pages). The
// tensors, already checked against the manifest, are in manifest order; in device memory
// (device "cuda") they are copied to the host first. Returns the first problem, naming the
// tensor, the index, the value and what is allowed; else fills *indices with what it read.
std::optional<std::string> checkKvCache(const RuntimeManifest& manifest, const std::string& device,
                                        const std::vector<DLTensor*>& tensors,
                                        const RunSizes& sizes, CacheIndices* indices);

// For a ragged batch (a `cu_seqlens_q` argument): cu_seqlens_q[0] = 0, never decreasing, and
// cu_seqlens_q[B] = total_q, q's rows. O(B). Fills *offsets with its B + 1 values when they
// hold; else returns the first problem, naming the index, the value and what is allowed.
std::optional<std::string> readQueryOffsets(const RuntimeManifest& manifest,
                                            const std::string& device,
                                            const std::vector<DLTensor*>& tensors,
                                            const RunSizes& sizes, std::vector<int64_t>* offsets);

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_KVCACHECHECK_H
