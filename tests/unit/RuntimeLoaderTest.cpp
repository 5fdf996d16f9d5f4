// The runtime loads real bundles and refuses mismatched ones with a message, never a crash.
#include "Abi/Manifest.h"
#include "Driver/Driver.h"
#include "Link/BundleWriter.h"
#include "Link/Toolchain.h"
#include "TestSupport.h"
#include "attnc/Float8.hpp"
#include "attnc/Runtime.hpp"

#include <array>
#include <cmath>
#include <dlfcn.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <thread>

namespace attnc {
namespace {

namespace fs = std::filesystem;

class RuntimeLoader : public ::testing::Test {
protected:

  std::string compile(const std::string& spec) {
    KernelRequest kernel;
    kernel.backend = "reference";
    return compileKernel(parseSpec(spec), kernel, {Emit::So}, dir_).primary.string();
  }

  // A reference bundle whose manifest or ABI number was tampered with; the manifest's content
  // hash is stamped again unless `restamp` is false.
  std::string tampered(const std::string& spec, uint32_t abi,
                       const std::function<void(nlohmann::json&)>& edit, bool restamp = true) {
    Spec s = parseSpec(spec);
    BundleRequest request;
    request.manifest =
        buildManifest(s, "reference", nlohmann::json::object(), {parseTarget("host"), {}});
    edit(request.manifest);
    if (restamp)
      stampContentHash(request.manifest);
    request.linkInputs = {findArchive("libattnc_bundle_reference.a"),
                          findArchive("libattnc_core.a")};
    request.stem = "tampered";
    request.abiVersion = abi;
    return writeBundle(request, dir_).bundle.string();
  }

  static void expectOpenFails(const std::string& path, attnc_status status,
                              const std::string& mention) {
    try {
      runtime::Bundle::open(path);
      FAIL() << "opened " << path;
    } catch (const runtime::Error& e) {
      EXPECT_EQ(e.status(), status) << e.what();
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  }

  // Runs `bundle` at B=2, Tq=5, Tk=9 and compares o with the reference's.
  static void expectMatchesReference(const runtime::Bundle& bundle, const std::string& spec) {
    tools::Call call = test::randomCall(spec, 2, 5, 9);
    std::vector<attnc_named_tensor> named = call.named();
    bundle.run(named, 2);
    test::Outputs expected = test::runReferenceOn(call);
    std::vector<double> o = call.tensor("o").values();
    for (size_t i = 0; i < o.size(); ++i)
      EXPECT_NEAR(o[i], expected.o[i], 1e-5);
  }

  static void expectBackwardRefused(const runtime::Bundle& bundle,
                                    const std::vector<attnc_named_tensor>& named,
                                    const std::string& why) {
    try {
      bundle.runBackward(named, 1);
      ADD_FAILURE() << "the backward ran; expected: " << why;
    } catch (const runtime::Error& e) {
      EXPECT_EQ(e.status(), ATTNC_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }

  test::ScratchDir scratch_{"loader"};
  const fs::path& dir_ = scratch_.path();
};

TEST_F(RuntimeLoader, RunsABundleAndMatchesTheReference) {
  const std::string spec = "heads=4 kv_heads=2 d_k=8 mask=causal lse=true";
  runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
  expectMatchesReference(bundle, spec);
  EXPECT_NE(bundle.manifest().find("\"backend\": \"reference\""), std::string_view::npos);
}

TEST_F(RuntimeLoader, RefusesAnotherAbiVersion) {
  std::string path = tampered("d_k=8", 999, [](nlohmann::json& m) { m["abi_version"] = 999; });
  expectOpenFails(path, ATTNC_ERROR_ABI_MISMATCH, "ABI version 999");
}

TEST_F(RuntimeLoader, RefusesMissingCpuFeatures) {
  std::string path = tampered("d_k=8", ATTNC_ABI_VERSION, [](nlohmann::json& m) {
    m["target"]["cpu_features"] = {"attnc_imaginary_isa"};
  });
  expectOpenFails(path, ATTNC_ERROR_UNSUPPORTED_TARGET, "attnc_imaginary_isa");
}

TEST_F(RuntimeLoader, RefusesAnotherArchitecture) {
  std::string path = tampered("d_k=8", ATTNC_ABI_VERSION,
                              [](nlohmann::json& m) { m["target"]["arch"] = "riscv64"; });
  expectOpenFails(path, ATTNC_ERROR_UNSUPPORTED_TARGET, "riscv64");
}

TEST_F(RuntimeLoader, RefusesABrokenManifest) {
  std::string path =
      tampered("d_k=8", ATTNC_ABI_VERSION, [](nlohmann::json& m) { m.erase("arguments"); });
  expectOpenFails(path, ATTNC_ERROR_MANIFEST, "arguments");
}

TEST_F(RuntimeLoader, RefusesAManifestEditedAfterCompile) {
  std::string path = tampered(
      "d_k=8", ATTNC_ABI_VERSION, [](nlohmann::json& m) { m["arguments"][3]["shape"][3] = 4; },
      /*restamp=*/false);
  expectOpenFails(path, ATTNC_ERROR_MANIFEST, "altered or damaged after attnc compiled it");
}

TEST_F(RuntimeLoader, RefusesATruncatedBundleBeforeLoadingIt) {
  const fs::path whole = compile("d_k=8");
  for (uintmax_t keep : {uintmax_t{3}, uintmax_t{100}, fs::file_size(whole) / 2}) {
    const fs::path cut = dir_ / ("cut" + std::to_string(keep) + ".so");
    fs::copy_file(whole, cut);
    fs::resize_file(cut, keep);
    expectOpenFails(cut.string(), ATTNC_ERROR_LOAD, keep < 64 ? "not an ELF file" : "truncated");
  }
  expectOpenFails(dir_.string(), ATTNC_ERROR_LOAD, "not a regular file");
}

TEST_F(RuntimeLoader, RefusesFilesThatAreNotBundles) {
  expectOpenFails((dir_ / "missing.so").string(), ATTNC_ERROR_LOAD, "cannot load");
  fs::path runtimeLibrary =
      fs::path(findArchive("libattnc_core.a")).parent_path() / "libattnc_runtime.so";
  expectOpenFails(runtimeLibrary.string(), ATTNC_ERROR_LOAD, "not an attnc bundle");
}

class TensorChecks : public RuntimeLoader {
protected:
  void expectRunFails(tools::Call& call, attnc_status status, const std::string& mention,
                      std::vector<attnc_named_tensor> named = {}) {
    runtime::Bundle bundle = runtime::Bundle::open(compile(call.spec.canonical()));
    if (named.empty())
      named = call.named();
    try {
      bundle.run(named);
      FAIL() << "ran";
    } catch (const runtime::Error& e) {
      EXPECT_EQ(e.status(), status) << e.what();
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  }
};

TEST_F(TensorChecks, WrongShape) {
  tools::Call call = test::randomCall("heads=4 d_k=8", 1, 5, 5);
  int64_t* shape = call.tensor("v").dl()->shape;
  shape[2] = 6; // Tk = 5 from k, 6 in v
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "tensor 'v' has shape [1,4,6,8]");
}

// A shape error names the sizes the expected shape uses, as bound, and the tensor that bound
// each. It once printed every size, unbound ones as 0 ("Tk=0" for q), and blamed a wrong
// seq_lens in a ragged batch on cu_seqlens_q without naming seq_lens, which had bound B.
TEST_F(TensorChecks, ShapeErrorsNameTheBoundSizesAndWhereEachCameFrom) {
  tools::Call call = test::randomCall("heads=4 d_k=8", 1, 5, 7);
  call.tensor("q").dl()->shape[1] = 3;
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH,
                 "tensor 'q' has shape [1,3,5,8]; expected [B,4,Tq,8] with B=1, Tq=5 "
                 "(dimension 1)");
  tools::Call wrongV = test::randomCall("heads=4 d_k=8", 1, 5, 7);
  wrongV.tensor("v").dl()->shape[2] = 6;
  expectRunFails(wrongV, ATTNC_ERROR_TENSOR_MISMATCH,
                 "expected [B,4,Tk,8] with B=1 (from 'q'), Tk=7 (from 'k') (dimension 2)");
  // q [total_q, H, d], then k_pages, v_pages, seq_lens [B]: seq_lens binds B.
  const std::string ragged =
      "heads=2 d_k=8 layout=bshd kv_cache=paged page_size=4 ragged_q=true";
  tools::Call shortLengths = test::randomCall(ragged, 3, 4, 12);
  shortLengths.tensor("seq_lens").dl()->shape[0] = 2;
  expectRunFails(shortLengths, ATTNC_ERROR_TENSOR_MISMATCH,
                 "tensor 'cu_seqlens_q' has shape [4]; expected [B+1] with B=2 (from "
                 "'seq_lens') (dimension 0)");
}

TEST_F(TensorChecks, WrongDtype) {
  tools::Call call = test::randomCall("heads=4 d_k=8", 1, 5, 5);
  call.tensor("q").dl()->dtype = {kDLFloat, 16, 1};
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "tensor 'q' has dtype f16; expected f32");
}

TEST_F(TensorChecks, MissingUnknownAndDuplicateNames) {
  tools::Call call = test::randomCall("heads=4 d_k=8", 1, 5, 5);
  std::vector<attnc_named_tensor> named = call.named();
  named.pop_back();
  expectRunFails(call, ATTNC_ERROR_INVALID_ARGUMENT, "tensor 'o' is missing", named);
  named.push_back({"out", call.tensor("o").dl()});
  expectRunFails(call, ATTNC_ERROR_INVALID_ARGUMENT, "unknown tensor name 'out'", named);
  named.back() = {"q", call.tensor("q").dl()};
  expectRunFails(call, ATTNC_ERROR_INVALID_ARGUMENT, "tensor 'q' is given twice", named);
}

TEST_F(TensorChecks, OverlappingOutputStrides) {
  tools::Call call = test::randomCall("heads=2 d_k=4", 1, 3, 3);
  int64_t strides[4] = {0, 0, 4, 1}; // every head writes the same rows
  call.tensor("o").dl()->strides = strides;
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "overlap");
}

TEST_F(TensorChecks, OutputAliasingAnInput) {
  tools::Call call = test::randomCall("heads=2 d_k=4", 1, 3, 3);
  call.tensor("o").dl()->data = call.tensor("q").dl()->data; // same shape, same buffer
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "tensor 'o' shares memory with tensor 'q'");
}

// kv_append writes k and v (k_pages and v_pages when paged, and a quantized cache's k_scale and
// v_scale): like outputs, they must overlap nothing. k == v, k_new inside k and k broadcast
// over B once returned ATTNC_OK and wrote rows through one tensor into another.
TEST_F(TensorChecks, TheCacheKvAppendWritesIntoOverlapsNothing) {
  const std::string spec = "heads=2 d_k=4 kv_cache=contiguous kv_append=true";
  tools::Call sameBuffer = test::randomCall(spec, 2, 1, 6);
  sameBuffer.tensor("v").dl()->data = sameBuffer.tensor("k").dl()->data;
  expectRunFails(sameBuffer, ATTNC_ERROR_TENSOR_MISMATCH,
                 "tensor 'k' shares memory with tensor 'v'; 'k' is a cache tensor kv_append "
                 "writes into");
  tools::Call rowsInCache = test::randomCall(spec, 2, 1, 6);
  rowsInCache.tensor("k_new").dl()->data = rowsInCache.tensor("k").dl()->data;
  expectRunFails(rowsInCache, ATTNC_ERROR_TENSOR_MISMATCH,
                 "tensor 'k' shares memory with tensor 'k_new'");
  tools::Call broadcast = test::randomCall(spec, 2, 1, 6);
  int64_t strides[4] = {0, 24, 4, 1};
  broadcast.tensor("k").dl()->strides = strides;
  expectRunFails(broadcast, ATTNC_ERROR_TENSOR_MISMATCH,
                 "tensor 'k' is a cache tensor kv_append writes into whose strides make "
                 "elements overlap");
  const std::string int8 = "heads=2 d_k=4 kv_cache=paged page_size=4 kv_append=true kv_dtype=int8";
  tools::Call sharedScales = test::randomCall(int8, 2, 1, 8);
  sharedScales.tensor("v_scale").dl()->data = sharedScales.tensor("k_scale").dl()->data;
  expectRunFails(sharedScales, ATTNC_ERROR_TENSOR_MISMATCH,
                 "tensor 'k_scale' shares memory with tensor 'v_scale'");
}

// Views of one buffer with the same strides share memory only where they share an element: k
// and v interleaved position by position in one [B, H_kv, Tk, 2, d] cache are accepted, and
// the call gives what separate tensors give.
TEST_F(TensorChecks, InterleavedKAndVOfOneBufferAreAccepted) {
  const std::string spec = "heads=2 d_k=4 mask=causal kv_cache=contiguous kv_append=true";
  runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
  const int64_t B = 2, Tq = 2, Tk = 6, H = 2, d = 4;
  tools::Call separate = test::randomCall(spec, B, Tq, Tk);
  tools::Call interleaved = test::randomCall(spec, B, Tq, Tk);
  separate.tensor("seq_lens").assign({6, 3});
  interleaved.tensor("seq_lens").assign({6, 3});
  HostTensor cache(separate.tensor("k").dtype(), {B, H, Tk, 2, d});
  std::vector<double> both(cache.bytes() / sizeof(float));
  const std::vector<double> k = separate.tensor("k").values(), v = separate.tensor("v").values();
  for (size_t row = 0; row < k.size() / d; ++row)
    for (int64_t e = 0; e < d; ++e) {
      both[row * 2 * d + e] = k[row * d + e];
      both[row * 2 * d + d + e] = v[row * d + e];
    }
  cache.assign(both);
  int64_t strides[4] = {H * Tk * 2 * d, Tk * 2 * d, 2 * d, 1};
  for (const char* name : {"k", "v"}) {
    DLTensor& t = *interleaved.tensor(name).dl();
    t.data = static_cast<float*>(cache.data()) + (name[0] == 'v' ? d : 0);
    t.strides = strides;
  }
  std::vector<attnc_named_tensor> a = separate.named(), b = interleaved.named();
  bundle.run(a);
  bundle.run(b);
  EXPECT_EQ(separate.tensor("o").values(), interleaved.tensor("o").values());
  EXPECT_EQ(separate.tensor("k").values(), interleaved.tensor("k").values());
  EXPECT_EQ(separate.tensor("v").values(), interleaved.tensor("v").values());
}

TEST_F(TensorChecks, NegativeStrides) {
  tools::Call call = test::randomCall("heads=2 d_k=4", 1, 3, 3);
  int64_t strides[4] = {24, 12, -4, 1};
  call.tensor("k").dl()->strides = strides;
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "negative stride -4 in dimension 2");
}

// DLTensors a careless or hostile caller builds: every field is checked before it is read.
TEST_F(TensorChecks, MalformedDLTensorFields) {
  tools::Call call = test::randomCall("heads=2 d_k=4", 1, 3, 3);
  DLTensor& k = *call.tensor("k").dl();
  int64_t* shape = k.shape;
  k.shape = nullptr;
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "tensor 'k' has a null shape pointer");
  k.shape = shape;
  k.ndim = 1000000;
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "tensor 'k' has rank 1000000; expected");
  k.ndim = 4;
  k.byte_offset = uint64_t{1} << 63;
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "past the address space");
  k.byte_offset = 0;
  shape[0] = -1;
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "negative extent -1 in dimension 0");
}

// Strides whose byte span wraps 64 bits once made the overlap check pass (2^62 - 1 elements of
// f32) or put batch 1 on batch 0 (2^62).
TEST_F(TensorChecks, StridesPastTheAddressSpace) {
  tools::Call call = test::randomCall("heads=2 d_k=4", 2, 3, 3);
  for (int64_t batchStride : {(int64_t{1} << 62) - 1, int64_t{1} << 62}) {
    int64_t strides[4] = {batchStride, 12, 4, 1};
    call.tensor("o").dl()->strides = strides;
    expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "tensor 'o' ");
    call.tensor("o").dl()->strides = nullptr;
  }
  int64_t* shape = call.tensor("q").dl()->shape;
  shape[0] = int64_t{1} << 32; // 2^32 · 2^31 · 3 · 4 elements: more than int64 counts
  shape[1] = int64_t{1} << 31;
  expectRunFails(call, ATTNC_ERROR_TENSOR_MISMATCH, "more elements than 64 bits can count");
}

TEST_F(TensorChecks, StridedInputsGiveTheSameResult) {
  // q stored as [B, T, H, D] in memory but described as [B, H, T, D] through strides.
  const std::string spec = "heads=2 d_k=4 mask=causal";
  tools::Call compact = test::randomCall(spec, 1, 3, 3);
  tools::Call strided = test::randomCall(spec, 1, 3, 3);
  std::vector<double> q = compact.tensor("q").values(), qBshd(q.size());
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 3; ++t)
      for (int d = 0; d < 4; ++d)
        qBshd[(t * 2 + h) * 4 + d] = q[(h * 3 + t) * 4 + d];
  strided.tensor("q").assign(qBshd);
  int64_t strides[4] = {24, 4, 8, 1};
  strided.tensor("q").dl()->strides = strides;
  runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
  std::vector<attnc_named_tensor> a = compact.named(), b = strided.named();
  bundle.run(a);
  bundle.run(b);
  EXPECT_EQ(compact.tensor("o").values(), strided.tensor("o").values());
}

// A KV cache's lengths and block table, checked before any kernel reads through them; the
// entries past a sequence's last page are not read, whatever they hold.
TEST_F(TensorChecks, KvCacheLengthsAndBlockTablesAreCheckedBeforeTheKernel) {
  const std::string paged = "heads=2 d_k=8 kv_cache=paged page_size=4";
  auto call = [&](std::vector<double> lengths, std::vector<double> table) {
    tools::Call c = test::randomCall(paged, 2, 1, 12); // 3 pages per sequence, 7 in the cache
    c.tensor("seq_lens").assign(lengths);
    c.tensor("block_table").assign(table);
    return c;
  };
  tools::Call fine = call({12, 5}, {0, 1, 2, 3, 4, -1});
  runtime::Bundle bundle = runtime::Bundle::open(compile(paged));
  std::vector<attnc_named_tensor> named = fine.named();
  bundle.run(named);
  tools::Call farPage = call({12, 5}, {0, 1, 2, 3, 7, -1});
  expectRunFails(farPage, ATTNC_ERROR_INVALID_ARGUMENT,
                 "block_table[1, 1] = 7 names no page: k_pages and v_pages have 7");
  tools::Call negativePage = call({12, 9}, {0, 1, 2, 3, 4, -1});
  expectRunFails(negativePage, ATTNC_ERROR_INVALID_ARGUMENT, "block_table[1, 2] = -1 names no page");
  tools::Call tooLong = call({13, 5}, {0, 1, 2, 3, 4, 5});
  expectRunFails(tooLong, ATTNC_ERROR_INVALID_ARGUMENT, "seq_lens[0] = 13 is outside [0, Tk=12]");
  tools::Call negative = call({12, -1}, {0, 1, 2, 3, 4, 5});
  expectRunFails(negative, ATTNC_ERROR_INVALID_ARGUMENT, "seq_lens[1] = -1 is outside [0, Tk=12]");
  tools::Call contiguous = test::randomCall("heads=2 d_k=8 kv_cache=contiguous", 2, 1, 12);
  contiguous.tensor("seq_lens").assign({3, 20});
  expectRunFails(contiguous, ATTNC_ERROR_INVALID_ARGUMENT, "seq_lens[1] = 20 is outside [0, Tk=12]");
}

// A ragged batch's row offsets, checked before the kernel runs on any sequence: 0 first, never
// decreasing, q's rows last.
TEST_F(TensorChecks, RaggedRowOffsetsAreCheckedBeforeTheKernel) {
  const std::string ragged = "heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true";
  runtime::Bundle bundle = runtime::Bundle::open(compile(ragged));
  auto call = [&](std::vector<double> offsets) {
    tools::Call c = test::randomCall(ragged, 3, 4, 12);
    EXPECT_EQ(c.tensor("cu_seqlens_q").values().back(), 10); // q's rows, as drawn
    c.tensor("cu_seqlens_q").assign(offsets);
    return c;
  };
  tools::Call fine = call({0, 4, 4, 10});
  std::vector<attnc_named_tensor> named = fine.named();
  bundle.run(named);
  tools::Call late = call({1, 4, 4, 10});
  expectRunFails(late, ATTNC_ERROR_INVALID_ARGUMENT,
                 "cu_seqlens_q[0] = 1; the first sequence's rows start at 0");
  tools::Call decreasing = call({0, 5, 3, 10});
  expectRunFails(decreasing, ATTNC_ERROR_INVALID_ARGUMENT,
                 "cu_seqlens_q[2] = 3 is less than cu_seqlens_q[1] = 5");
  tools::Call overrun = call({0, 4, 4, 11});
  expectRunFails(overrun, ATTNC_ERROR_INVALID_ARGUMENT,
                 "cu_seqlens_q[3] = 11 is not total_q = 10, the rows of q and o");
  tools::Call endsEarly = call({0, 4, 4, 9});
  expectRunFails(endsEarly, ATTNC_ERROR_INVALID_ARGUMENT, "cu_seqlens_q[3] = 9 is not total_q = 10");
}

// kv_append: the runtime writes row i of k_new and v_new at position seq_lens[b] - Tq + i of
// each sequence before the kernel runs, and leaves every other position alone; a sequence
// holding fewer keys than the new rows is refused before anything is written.
TEST_F(TensorChecks, NewRowsAreWrittenIntoTheCacheBeforeTheKernel) {
  const std::string spec = "heads=2 d_k=4 mask=causal kv_cache=contiguous kv_append=true";
  runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
  const int64_t B = 2, Tq = 2, Tk = 6, H = 2, d = 4;
  tools::Call call = test::randomCall(spec, B, Tq, Tk);
  call.tensor("seq_lens").assign({6, 3});
  const std::vector<double> k = call.tensor("k").values(), v = call.tensor("v").values(),
                            kNew = call.tensor("k_new").values(),
                            vNew = call.tensor("v_new").values();
  std::vector<attnc_named_tensor> named = call.named();
  bundle.run(named);
  const std::vector<double> kAfter = call.tensor("k").values(), vAfter = call.tensor("v").values();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < H; ++g)
      for (int64_t j = 0; j < Tk; ++j) {
        const int64_t first = b == 0 ? 4 : 1, i = j - first; // the new rows' positions
        for (int64_t e = 0; e < d; ++e) {
          const int64_t at = test::at4(H, Tk, d, b, g, j, e);
          const bool fresh = i >= 0 && i < Tq;
          EXPECT_EQ(kAfter[at], fresh ? kNew[test::at4(H, Tq, d, b, g, i, e)] : k[at]);
          EXPECT_EQ(vAfter[at], fresh ? vNew[test::at4(H, Tq, d, b, g, i, e)] : v[at]);
        }
      }
  tools::Call tooShort = test::randomCall(spec, B, Tq, Tk);
  tooShort.tensor("seq_lens").assign({6, 1});
  const std::vector<double> before = tooShort.tensor("k").values();
  expectRunFails(tooShort, ATTNC_ERROR_INVALID_ARGUMENT,
                 "seq_lens[1] = 1 is less than the 2 new rows of sequence 1");
  EXPECT_EQ(tooShort.tensor("k").values(), before);
}

// A quantized cache's new rows: each row's scale is max|x| / 127 (int8) or / 448 (fp8 E4M3) in
// f32, its largest element stored as the code's largest magnitude, and every element within half
// a step of the code's grid (int8: half the scale; E4M3: 2^-4 of the value, or half its
// smallest subnormal step).
TEST_F(TensorChecks, QuantizedNewRowsAreStoredAsCodesTimesTheirScales) {
  for (const std::string dtype : {"int8", "fp8_e4m3"}) {
    SCOPED_TRACE(dtype);
    const bool fp8 = dtype == "fp8_e4m3";
    const std::string spec = "heads=2 d_k=8 kv_cache=contiguous kv_append=true kv_dtype=" + dtype;
    runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
    const int64_t B = 1, Tq = 2, Tk = 5, H = 2, d = 8;
    tools::Call call = test::randomCall(spec, B, Tq, Tk);
    call.tensor("seq_lens").assign({5});
    std::vector<attnc_named_tensor> named = call.named();
    bundle.run(named);
    const std::vector<double> codes = call.tensor("k").values(),
                              scales = call.tensor("k_scale").values(),
                              rows = call.tensor("k_new").values();
    for (int64_t g = 0; g < H; ++g)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t position = Tk - Tq + i;
        double largest = 0;
        for (int64_t e = 0; e < d; ++e)
          largest = std::max(largest, std::fabs(rows[test::at4(H, Tq, d, 0, g, i, e)]));
        const double scale = scales[g * Tk + position];
        EXPECT_EQ(scale, static_cast<float>(largest / (fp8 ? 448.0 : 127.0)));
        for (int64_t e = 0; e < d; ++e) {
          const double x = rows[test::at4(H, Tq, d, 0, g, i, e)];
          const double code = codes[test::at4(H, Tk, d, 0, g, position, e)];
          const double value = fp8 ? e4m3ToDouble(static_cast<uint8_t>(code)) : code;
          if (std::fabs(x) == largest) {
            EXPECT_EQ(std::fabs(value), fp8 ? 448.0 : 127.0);
          }
          const double step =
              fp8 ? std::max(std::fabs(x / scale) / 16, std::ldexp(1.0, -10)) : 0.5;
          EXPECT_LE(std::fabs(value - x / scale), step * (1 + 1e-6)) << x << " " << code;
        }
      }
  }
}

// A new row holding NaN or ±inf reads as NaN in either quantized cache: codes 0, scale NaN. An
// int8 cache once stored int8(NaN) (undefined behaviour; 0 in release builds), so kernels
// attended a finite key where the reference had NaN, and an fp8 row of NaNs and zeros was stored
// as a zero row.
TEST_F(TensorChecks, NonFiniteNewRowsOfAQuantizedCacheReadAsNaN) {
  const double nan = std::nan(""), inf = INFINITY;
  for (const std::string dtype : {"int8", "fp8_e4m3"}) {
    SCOPED_TRACE(dtype);
    const std::string spec = "heads=1 d_k=4 kv_cache=contiguous kv_append=true kv_dtype=" + dtype;
    runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
    tools::Call call = test::randomCall(spec, 1, 4, 4);
    call.tensor("seq_lens").assign({4});
    call.tensor("k_new").assign({1, nan, 2, 3, -inf, 1, 2, 3, nan, 0, 0, 0, 1, 2, 3, 4});
    std::vector<attnc_named_tensor> named = call.named();
    bundle.run(named);
    const std::vector<double> codes = call.tensor("k").values(),
                              scales = call.tensor("k_scale").values();
    for (int64_t row = 0; row < 3; ++row) {
      EXPECT_TRUE(std::isnan(scales[row])) << row;
      for (int64_t e = 0; e < 4; ++e)
        EXPECT_EQ(codes[row * 4 + e], 0) << row << " " << e;
    }
    EXPECT_EQ(scales[3], static_cast<float>(4 / (dtype == "int8" ? 127.0 : 448.0)));
  }
}

TEST_F(TensorChecks, DecodeKernelReadsKeysAndValuesOfAnyStride) {
  // The MLIR decode kernel loads K and V rows as vectors when their head dim is dense, and
  // element by element otherwise: K and V here keep every other element of a wider tensor.
  if (!ATTNC_HAS_MLIR)
    GTEST_SKIP() << "attnc was built without the mlir backend";
  const std::string spec = "heads=4 kv_heads=2 d_k=16 mask=causal lse=true";
  KernelRequest kernel;
  kernel.backend = "mlir";
  kernel.schedule = {{"decode", 1}};
  runtime::Bundle bundle =
      runtime::Bundle::open(compileKernel(parseSpec(spec), kernel, {Emit::So}, dir_).primary);
  tools::Call dense = test::randomCall(spec, 2, 3, 300);
  tools::Call strided = test::randomCall(spec, 2, 3, 300);
  std::vector<HostTensor> wide;
  std::array<int64_t, 4> strides{2 * 300 * 32, 300 * 32, 32, 2};
  for (const char* name : {"k", "v"}) {
    std::vector<double> values = dense.tensor(name).values(), spread(values.size() * 2, 0.0);
    for (size_t e = 0; e < values.size(); ++e)
      spread[2 * e] = values[e];
    wide.emplace_back(dense.tensor(name).dtype(), std::vector<int64_t>{2, 2, 300, 32});
    wide.back().assign(spread);
    strided.tensor(name).dl()->data = wide.back().data();
    strided.tensor(name).dl()->strides = strides.data();
  }
  std::vector<attnc_named_tensor> a = dense.named(), b = strided.named();
  bundle.run(a);
  bundle.run(b);
  EXPECT_EQ(dense.tensor("o").values(), strided.tensor("o").values());
  EXPECT_EQ(dense.tensor("lse").values(), strided.tensor("lse").values());
}

TEST_F(RuntimeLoader, ManyThreadsRunOneBundle) {
  const std::string spec = "heads=2 d_k=8 mask=causal dropout=0.2 seed=4";
  runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
  std::vector<tools::Call> calls;
  for (int t = 0; t < 6; ++t)
    calls.push_back(test::randomCall(spec, 2, 17, 17, /*seed=*/t % 2));
  std::vector<std::thread> threads;
  for (tools::Call& call : calls)
    threads.emplace_back([&bundle, &call] {
      std::vector<attnc_named_tensor> named = call.named();
      for (int r = 0; r < 3; ++r)
        bundle.run(named, 2);
    });
  for (std::thread& t : threads)
    t.join();
  for (int t = 2; t < 6; ++t)
    EXPECT_EQ(calls[t].tensor("o").values(), calls[t % 2].tensor("o").values());
  EXPECT_NE(calls[0].tensor("o").values(), calls[1].tensor("o").values());
}

// The backward entry through the runtime: the gradients the reference's own backward gives,
// bit for bit (the kernel is the reference), and the refusals that name what is wrong.
TEST_F(RuntimeLoader, RunsTheBackwardEntry) {
  const std::string spec = "heads=4 kv_heads=2 d_k=8 mask=causal bias=true lse=true backward=true";
  runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
  tools::Call forward = test::randomCall(spec, 2, 5, 9);
  std::vector<attnc_named_tensor> named = forward.named();
  bundle.run(named, 2);
  tools::Call backward = tools::prepareBackwardCall(std::move(forward), 3);
  named = backward.named();
  bundle.runBackward(named, 2);
  std::vector<HostTensor> expected = tools::referenceOutputs(backward, serialFor());
  size_t k = 0;
  for (size_t a = 0; a < backward.arguments.size(); ++a)
    if (backward.arguments[a].role == ArgumentRole::Output) {
      SCOPED_TRACE(backward.arguments[a].name);
      std::vector<double> got = backward.tensors[a].values(), want = expected[k++].values();
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-6);
    }
  EXPECT_EQ(k, 4u); // grad_q, grad_k, grad_v, grad_bias

  // Deterministic: the same bits on one thread as on two.
  std::vector<std::vector<double>> twoThreads;
  for (const HostTensor& tensor : backward.tensors)
    twoThreads.push_back(tensor.values());
  bundle.runBackward(named, 1);
  for (size_t a = 0; a < backward.arguments.size(); ++a)
    EXPECT_EQ(backward.tensors[a].values(), twoThreads[a]) << backward.arguments[a].name;

  named.pop_back(); // grad_bias, the last argument
  expectBackwardRefused(bundle, named, "tensor 'grad_bias' is missing");
}

TEST_F(RuntimeLoader, RefusesABackwardEntryThatTakesACache) {
  std::string path =
      tampered("d_k=8 lse=true backward=true", ATTNC_ABI_VERSION, [](nlohmann::json& m) {
        m["backward"]["arguments"].push_back(
            {{"name", "block_table"}, {"role", "input"}, {"dtypes", {"i32"}}, {"shape", {"B"}}});
      });
  expectOpenFails(path, ATTNC_ERROR_MANIFEST, "backward argument 'block_table' is a KV cache's");
}

TEST_F(RuntimeLoader, RefusesTheBackwardOfABundleWithoutOne) {
  const std::string spec = "heads=2 d_k=8 lse=true";
  runtime::Bundle bundle = runtime::Bundle::open(compile(spec));
  tools::Call forward = test::randomCall(spec, 1, 3, 3);
  std::vector<attnc_named_tensor> named = forward.named();
  attnc_error error{};
  EXPECT_EQ(attnc_bundle_run_backward(nullptr, named.data(), named.size(), nullptr, &error),
            ATTNC_ERROR_INVALID_ARGUMENT);
  expectBackwardRefused(bundle, named, "compile its spec with backward=true");
}

// A linked kernel's exports, made here from a reference bundle's run function and a manifest
// listing two targets: one needing a CPU feature no host has, then this host.
class LinkedKernels : public RuntimeLoader {
protected:
  void SetUp() override {
    const std::string path = compile("heads=2 d_k=8 mask=causal");
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    const auto run = reinterpret_cast<attnc_kernel_run_fn>(dlsym(handle_, "attnc_kernel_run"));
    runs_ = {run, run};
    nlohmann::json manifest = nlohmann::json::parse(
        static_cast<const char*>(dlsym(handle_, "attnc_kernel_manifest")));
    nlohmann::json imaginary = manifest["target"];
    imaginary["name"] = "x86-64-imaginary";
    imaginary["cpu_features"] = {"attnc_imaginary_isa"};
    manifest["targets"] = {imaginary, manifest["target"]};
    stampContentHash(manifest);
    manifest_ = manifest.dump();
    exports_ = {ATTNC_ABI_VERSION, 2, manifest_.c_str(), run, runs_.data()};
  }
  void TearDown() override {
    unsetenv("ATTNC_TARGET");
    if (handle_)
      dlclose(handle_);
  }

  static void expectOpenFails(const attnc_kernel_exports& exports, attnc_status status,
                              const std::string& mention) {
    try {
      runtime::Bundle::openLinked(exports);
      FAIL() << "opened";
    } catch (const runtime::Error& e) {
      EXPECT_EQ(e.status(), status) << e.what();
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  }

  void* handle_ = nullptr;
  std::array<attnc_kernel_run_fn, 2> runs_{};
  std::string manifest_;
  attnc_kernel_exports exports_{};
};

TEST_F(LinkedKernels, RunsTheFirstTargetThisHostSupports) {
  runtime::Bundle bundle = runtime::Bundle::openLinked(exports_);
  EXPECT_EQ(bundle.target(), "host");
  EXPECT_NE(bundle.targetChoice().find("passed over x86-64-imaginary: it needs CPU features "
                                       "this host lacks: attnc_imaginary_isa"),
            std::string_view::npos)
      << bundle.targetChoice();
  expectMatchesReference(bundle, "heads=2 d_k=8 mask=causal");
}

TEST_F(LinkedKernels, AttncTargetForcesOneOrNamesWhyNot) {
  setenv("ATTNC_TARGET", "host", 1);
  EXPECT_NE(runtime::Bundle::openLinked(exports_).targetChoice().find("forced by ATTNC_TARGET"),
            std::string_view::npos);
  setenv("ATTNC_TARGET", "x86-64-imaginary", 1);
  expectOpenFails(exports_, ATTNC_ERROR_UNSUPPORTED_TARGET,
                  "ATTNC_TARGET=x86-64-imaginary cannot run here");
  setenv("ATTNC_TARGET", "riscv", 1);
  expectOpenFails(exports_, ATTNC_ERROR_UNSUPPORTED_TARGET,
                  "it holds: x86-64-imaginary, host");
}

TEST_F(LinkedKernels, RefusesInconsistentExports) {
  attnc_kernel_exports exports = exports_;
  exports.num_targets = 3;
  expectOpenFails(exports, ATTNC_ERROR_MANIFEST, "3 run functions but its manifest lists 2");
  exports = exports_;
  exports.target_runs = nullptr;
  expectOpenFails(exports, ATTNC_ERROR_LOAD, "lacks attnc_kernel_target_runs");
  exports = exports_;
  exports.abi_version = 7;
  expectOpenFails(exports, ATTNC_ERROR_ABI_MISMATCH, "ABI version 7");
  attnc_bundle* bundle = nullptr;
  attnc_error error{};
  EXPECT_EQ(attnc_bundle_open_linked(nullptr, &bundle, &error), ATTNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bundle, nullptr);
}

} // namespace
} // namespace attnc
