// The one strided iteration engine behind every CPU kernel. Operands are
// tensors over the same logical shape (broadcast modes have stride 0); their
// nested layouts are refined to a common set of flat dimensions, coalesced,
// and walked first mode fastest in blocks along the innermost dimension.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/layout.hpp"

namespace sw {

constexpr int kMaxOperands = 3;

struct IterDim {
  int64_t extent;
  int64_t stride[kMaxOperands];
};

struct Iteration {
  int operands = 0;
  std::vector<IterDim> dims;  // dims[0] varies fastest
  int64_t total = 0;
};

// Builds the iteration over `layouts` (all with the same top-level extents).
// Returns false when the nested layouts have no common refinement; callers
// then materialise the inputs densely and try again.
bool build_iteration(const std::vector<const Layout*>& layouts, Iteration* out);

// Reorders the dimensions by operand k's stride magnitude, smallest first,
// and coalesces again: for visits whose order does not matter (a reduction
// to one element), operand k is then read in memory order.
void order_by_operand(Iteration* it, int k);

// Walks ordinals [begin, end): calls fn(offsets, count, inner_strides) where
// offsets[k] is operand k's element offset at the block start and the block
// runs `count` steps along dims[0].
template <typename F>
void walk(const Iteration& it, int64_t begin, int64_t end, F&& fn) {
  const size_t nd = it.dims.size();
  int64_t idx[64];
  int64_t off[kMaxOperands] = {0, 0, 0};
  int64_t rem = begin;
  for (size_t d = 0; d < nd; ++d) {
    idx[d] = rem % it.dims[d].extent;
    rem /= it.dims[d].extent;
    for (int k = 0; k < it.operands; ++k) off[k] += idx[d] * it.dims[d].stride[k];
  }
  int64_t inner_stride[kMaxOperands];
  for (int k = 0; k < it.operands; ++k) inner_stride[k] = nd ? it.dims[0].stride[k] : 0;
  const int64_t inner_extent = nd ? it.dims[0].extent : 1;
  while (begin < end) {
    const int64_t n = std::min(inner_extent - (nd ? idx[0] : 0), end - begin);
    fn(static_cast<const int64_t*>(off), n, static_cast<const int64_t*>(inner_stride));
    begin += n;
    if (begin >= end || nd == 0) break;
    for (int k = 0; k < it.operands; ++k) off[k] += n * inner_stride[k];
    idx[0] += n;
    for (size_t d = 0; d + 1 < nd && idx[d] == it.dims[d].extent; ++d) {
      for (int k = 0; k < it.operands; ++k) off[k] -= idx[d] * it.dims[d].stride[k];
      idx[d] = 0;
      ++idx[d + 1];
      for (int k = 0; k < it.operands; ++k) off[k] += it.dims[d + 1].stride[k];
    }
  }
}

// Copies the `element_size`-byte elements of a strided view of host memory
// (slot 0 at `src`, the view at slot `offset` with `layout`) densely, first
// mode fastest, to `dst`. Runs on the calling thread.
void gather_dense(const std::byte* src, int64_t offset, const Layout& layout, size_t element_size, std::byte* dst);

}  // namespace sw
