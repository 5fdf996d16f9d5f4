// The built-in masks' patterns written a second time, in C++ over an integer type and
// independently of their expressions: what tests/unit/BuiltinExpressionsTest.cpp checks
// Spec/BuiltinExpressions' expressions against element for element (the kernels and the
// reference compile and evaluate only the expressions).
//
// Positions: query row i sits at qpos = i + offset among the keys, where offset is 0 for
// top-left alignment and Tk - Tq for bottom-right (Positions.h). Key j sits at j. Block patterns
// (block_sparse, bigbird) tile the raw (i, j) grid in blocks of `block` rows and columns.
#ifndef ATTNC_TESTS_UNIT_MASKPREDICATES_H
#define ATTNC_TESTS_UNIT_MASKPREDICATES_H

namespace attnc::masks {

// a mod m in [0, m) for m > 0, whatever the sign of a (C++'s % truncates toward zero).
template <class Int> Int floorMod(Int a, Int m) { return ((a % m) + m) % m; }

// Causal: no key after the query's position.
template <class Int> auto causal(Int qpos, Int j) { return j <= qpos; }

// Sliding window: keys in [qpos - left, qpos + right].
template <class Int> auto window(Int qpos, Int j, Int left, Int right) {
  return j >= qpos - left && j <= qpos + right;
}

// Global tokens: the first n positions attend to every key and every query attends to them.
template <class Int> auto global(Int qpos, Int j, Int n) { return qpos < n || j < n; }

// Strided (Child et al. 2019, the "column" pattern): keys a multiple of stride away.
template <class Int> auto strided(Int qpos, Int j, Int stride) {
  return floorMod<Int>(qpos - j, stride) == 0;
}

// Dilated window (Beltagy et al. 2020): keys qpos - k*dilation for k in [-right, left].
template <class Int> auto dilated(Int qpos, Int j, Int left, Int right, Int dilation) {
  Int d = qpos - j;
  return floorMod<Int>(d, dilation) == 0 && d <= left * dilation && d >= -(right * dilation);
}

// BigBird's structured blocks (Zaheer et al. 2020): a window of windowBlocks blocks centred on
// the query block, and global blocks — the first ceil(g/2) and the last floor(g/2) block rows
// and columns. The random blocks are drawn per (head, query block) by random::bigbirdRandomBlock.
template <class Int>
auto bigbirdStructured(Int qb, Int kb, Int numQueryBlocks, Int numKeyBlocks, Int windowBlocks,
                       Int globalBlocks) {
  Int half = windowBlocks / 2, first = (globalBlocks + 1) / 2, last = globalBlocks / 2;
  return (kb - qb <= half && qb - kb <= half) || qb < first || qb >= numQueryBlocks - last ||
         kb < first || kb >= numKeyBlocks - last;
}

} // namespace attnc::masks

#endif // ATTNC_TESTS_UNIT_MASKPREDICATES_H
