#!/usr/bin/env bash
# Installs attnc from BUILD_DIR into a temporary prefix and uses it as an application would:
#   1. the package's files are there, and the installed runtime links no LLVM, MLIR or Halide;
#   2. examples/encoder configures against the prefix (find_package(attnc)), compiles its two
#      kernels with attnc_add_kernel, links, and runs with correct results, on the target the
#      runtime picks and on each target forced by ATTNC_TARGET; a second build does nothing;
#   3. the executable links no LLVM, MLIR or Halide (ldd);
#   4. attnc_add_kernel's other options (tests/install/kernel-options): BACKEND, SCHEDULE,
#      EMIT, TUNED with TUNING_DB, and a bad call stopping the configure;
#   5. the installed attnc compiles a bundle that a C program, built with pkg-config's flags
#      (shared runtime) and against the static runtime, runs.
# Usage: check-install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$(realpath "$1")
build_dir=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/attnc-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "check-install: $*" >&2; exit 1; }
no_compiler_libs() { # the file's dynamic dependencies hold no LLVM, MLIR or Halide
  if ldd "$1" | grep -Ei 'llvm|mlir|halide'; then fail "$1 links a compiler library"; fi
}

echo "== cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log"
libdir=$(dirname "$(find "$prefix" -name libattnc_runtime.so -print -quit)")
for f in bin/attnc include/attnc/attnc.h include/attnc/Runtime.hpp lib/attnc/libattnc_core.a \
         lib/attnc/libattnc_bundle_fat.a; do
  [[ -e $prefix/$f ]] || fail "$f is not installed"
done
for f in libattnc_runtime.so libattnc_runtime.a cmake/attnc/attncConfig.cmake \
         cmake/attnc/attncConfigVersion.cmake cmake/attnc/AttncKernels.cmake pkgconfig/attnc.pc; do
  [[ -e $libdir/$f ]] || fail "$libdir/$f is not installed"
done
no_compiler_libs "$libdir/libattnc_runtime.so"

echo "== examples/encoder against the prefix"
cmake -S "$source_dir/examples/encoder" -B "$work/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log"
cmake --build "$work/example" >"$work/build.log" || { cat "$work/build.log"; fail "build failed"; }
cmake --build "$work/example" | grep -q "no work to do" || fail "a second build re-ran attnc"
app=$work/example/encoder_layer
no_compiler_libs "$app"
"$app"
if [[ $(uname -m) == x86_64 ]]; then
  for target in x86-64-avx512 x86-64-avx2; do
    if [[ $target == x86-64-avx512 ]] && ! grep -qw avx512bw /proc/cpuinfo; then
      # This CPU lacks AVX-512: forcing it must fail with the reason, not crash (the output
      # kept whole: under pipefail the app's own failure would fail a pipe into grep).
      if refused=$(ATTNC_TARGET=$target "$app" 2>&1); then fail "forced $target ran"; fi
      grep -q "lacks" <<<"$refused" || fail "forced $target failed without the reason: $refused"
      continue
    fi
    ATTNC_TARGET=$target "$app" | tee "$work/forced.log"
    grep -q "runs $target (forced by ATTNC_TARGET)" "$work/forced.log" || fail "$target not run"
  done
fi

echo "== attnc_add_kernel's options"
options=$source_dir/tests/install/kernel-options
mkdir -p "$work/options"
"$prefix/bin/attnc" tune 'heads=2 kv_heads=1 d_k=16' --seq-q 64 --trials 2 \
                    --db "$work/options/tuning.db" >/dev/null
cmake -S "$options" -B "$work/options" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log"
cmake --build "$work/options" >"$work/build.log" || { cat "$work/build.log"; fail "build failed"; }
"$work/options/kernel_options"
ls "$work"/options/attnc_kernels/mlir_scheduled/*.s >/dev/null || fail "EMIT asm wrote no .s"
grep -q '"query_tile": 32' "$work/options/attnc_kernels/mlir_scheduled/mlir_scheduled.json" ||
  fail "SCHEDULE was not used"
grep -q '"provenance": "tuned: trial' "$work/options/attnc_kernels/halide_tuned/halide_tuned.json" ||
  fail "TUNED did not use the tuning database's trial"
if cmake -S "$options" -B "$work/options-bad" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
         -DATTNC_BAD_CALL=ON >"$work/bad.log" 2>&1; then
  fail "a call with SCHEDULE and TUNED configured"
fi
grep -q "give SCHEDULE or TUNED, not both" "$work/bad.log" || { cat "$work/bad.log"; fail "no message"; }

echo "== the installed attnc and a C program on the runtime (pkg-config, then static)"
"$prefix/bin/attnc" compile 'variant=sdpa heads=4 d_k=32 mask=causal' --backend halide \
                    -o "$work/bundles" >/dev/null
bundle=$(echo "$work"/bundles/sdpa_*_halide.so)
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046  # pkg-config's flags are words
cc "$source_dir/examples/c_api/run_sdpa.c" -o "$work/run_sdpa" $(pkg-config --cflags --libs attnc) \
   -Wl,-rpath,"$libdir" -lm
"$work/run_sdpa" "$bundle"
# shellcheck disable=SC2046
cc "$source_dir/examples/c_api/run_sdpa.c" -o "$work/run_sdpa_static" \
   $(pkg-config --cflags attnc) "$libdir/libattnc_runtime.a" -ldl -pthread -lstdc++ -lm
ldd "$work/run_sdpa_static" | grep -q attnc_runtime && fail "the static runtime was not used"
"$work/run_sdpa_static" "$bundle"
echo "check-install: ok"
