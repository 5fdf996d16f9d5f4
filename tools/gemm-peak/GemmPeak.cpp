// attnc-gemm-peak: the rate of oneDNN's matmul on this machine, f32 and bf16 (f32 accumulation
// and output), the GEMM roofline of the prefill figures in docs/benchmarks.md: what the best
// library kernel of the machine (AMX tiles, AVX512-BF16 or FMA, as oneDNN picks) reaches on a
// square product, with nothing of attention's softmax in between. Best of five timed
// repetitions; threads as the OpenMP runtime is told (OMP_NUM_THREADS).
//   attnc-gemm-peak [SIZE]     # SIZE x SIZE x SIZE, 2048 unless given
#include <dnnl.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

namespace {

constexpr int kRepetitions = 5;

struct Rate {
  double gflops;
  std::string kernel; // oneDNN's implementation name (e.g. brg:avx512_core_amx)
};

// C[n x n] (f32) = A[n x n] B[n x n], A and B of `type`.
Rate matmulRate(dnnl::memory::data_type type, int64_t n) {
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc a({n, n}, type, memory::format_tag::ab);
  const memory::desc b({n, n}, type, memory::format_tag::ab);
  const memory::desc c({n, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
  const dnnl::matmul product(pd);
  // Operands of zeros: the rate does not depend on the values.
  memory am(a, engine), bm(b, engine), cm(c, engine);
  for (memory* m : {&am, &bm})
    std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
  const std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  product.execute(stream, args);
  stream.wait();
  const int calls = 10;
  double best = 0;
  for (int repetition = 0; repetition < kRepetitions; ++repetition) {
    const auto start = std::chrono::steady_clock::now();
    for (int call = 0; call < calls; ++call)
      product.execute(stream, args);
    stream.wait();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double gflops = 2.0 * n * n * n * calls / seconds / 1e9;
    best = gflops > best ? gflops : best;
  }
  return {best, pd.impl_info_str()};
}

} // namespace

int main(int argc, char** argv) {
  char* end = nullptr;
  const long size = argc == 2 ? std::strtol(argv[1], &end, 10) : 2048;
  if (argc > 2 || (argc == 2 && (*end != '\0' || size < 16 || size > 16384))) {
    std::fprintf(stderr, "usage: attnc-gemm-peak [SIZE]   (a square size from 16 to 16384)\n");
    return 2;
  }
  for (auto [name, type] : {std::pair{"f32", dnnl::memory::data_type::f32},
                            std::pair{"bf16", dnnl::memory::data_type::bf16}}) {
    try {
      const Rate rate = matmulRate(type, size);
      std::printf("oneDNN %s matmul %ld^3: %.1f GFLOP/s (%s)\n", name, size, rate.gflops,
                  rate.kernel.c_str());
    } catch (const dnnl::error& e) {
      // oneDNN refuses a type this CPU cannot multiply (bf16 before AVX512-BW, say).
      std::printf("oneDNN %s matmul %ld^3: none (%s)\n", name, size, e.what());
    }
  }
  return 0;
}
