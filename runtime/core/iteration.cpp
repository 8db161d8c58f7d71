#include "core/iteration.hpp"

#include <cstdlib>
#include <cstring>

#include "base/error.hpp"

namespace sw {

namespace {

struct Cursor {
  const Leaf* leaves;
  size_t count;
  size_t pos;
  int64_t remaining;  // extent left in the current leaf
  int64_t stride;     // stride at the current position

  void skip_units() {
    while (pos < count && leaves[pos].extent == 1) ++pos;
    if (pos < count) {
      remaining = leaves[pos].extent;
      stride = leaves[pos].stride;
    } else {
      remaining = 1;
      stride = 0;
    }
  }
};

// Merges neighbours that every operand walks contiguously.
void coalesce(Iteration* it) {
  std::vector<IterDim> merged;
  for (const IterDim& d : it->dims) {
    if (!merged.empty()) {
      IterDim& p = merged.back();
      bool ok = true;
      for (int k = 0; k < it->operands && ok; ++k) ok = d.stride[k] == p.stride[k] * p.extent;
      if (ok) {
        p.extent *= d.extent;
        continue;
      }
    }
    merged.push_back(d);
  }
  it->dims = std::move(merged);
}

}  // namespace

bool build_iteration(const std::vector<const Layout*>& layouts, Iteration* out) {
  const int n = static_cast<int>(layouts.size());
  if (n > kMaxOperands) internal_error("too many operands for one iteration");
  const Layout& first = *layouts[0];
  out->operands = n;
  out->dims.clear();
  out->total = first.size();
  if (out->total == 0) return true;
  for (size_t m = 0; m < first.rank(); ++m) {
    Cursor cur[kMaxOperands];
    for (int k = 0; k < n; ++k) {
      const Layout& l = *layouts[k];
      const size_t b = l.leaf_begin(m), e = l.leaf_begin(m + 1);
      cur[k] = Cursor{l.leaves().data() + b, e - b, 0, 1, 0};
      cur[k].skip_units();
    }
    int64_t left = first.extents()[m];
    while (left > 1) {
      int64_t step = left;
      for (int k = 0; k < n; ++k) step = std::min(step, cur[k].remaining);
      if (step <= 1) internal_error("operand layouts disagree on a mode's extent");
      IterDim d{step, {0, 0, 0}};
      for (int k = 0; k < n; ++k) {
        if (cur[k].remaining % step != 0) return false;
        d.stride[k] = cur[k].stride;
        cur[k].remaining /= step;
        cur[k].stride *= step;
        if (cur[k].remaining == 1) {
          ++cur[k].pos;
          cur[k].skip_units();
        }
      }
      out->dims.push_back(d);
      left /= step;
    }
  }
  coalesce(out);
  if (out->dims.size() > 60) internal_error("iteration has too many dimensions");
  return true;
}

void order_by_operand(Iteration* it, int k) {
  std::stable_sort(it->dims.begin(), it->dims.end(), [k](const IterDim& a, const IterDim& b) {
    return std::abs(a.stride[k]) < std::abs(b.stride[k]);
  });
  coalesce(it);
}

void gather_dense(const std::byte* src, int64_t offset, const Layout& layout, size_t element_size, std::byte* dst) {
  const int64_t n = layout.size();
  if (n == 0) return;
  const auto es = static_cast<int64_t>(element_size);
  auto dense = Layout::dense(layout.extents());
  Iteration it;
  if (!build_iteration({&layout, dense.get()}, &it)) {
    // No common refinement with the dense layout: element by element.
    for (int64_t o = 0; o < n; ++o)
      std::memcpy(dst + o * es, src + (offset + layout.index_of_ordinal(o)) * es, element_size);
    return;
  }
  walk(it, 0, n, [&](const int64_t* off, int64_t count, const int64_t* step) {
    const std::byte* from = src + (offset + off[0]) * es;
    std::byte* to = dst + off[1] * es;
    if (step[0] == 1) {
      std::memcpy(to, from, static_cast<size_t>(count * es));
      return;
    }
    for (int64_t i = 0; i < count; ++i) std::memcpy(to + i * es, from + i * step[0] * es, element_size);
  });
}

}  // namespace sw
