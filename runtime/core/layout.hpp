// Hierarchical layouts: congruent (shape, stride) trees, first mode fastest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/object.hpp"

namespace sw {

// How deep modes may nest (a leaf is depth 0, a tuple of leaves depth 1):
// every walk over a tree recurses, so the depth is bounded where trees are
// built, on a budget that fits any thread's stack.
constexpr int kMaxLayoutDepth = 32;

// One node of the congruent trees: a leaf (extent, stride) or a tuple.
struct Mode {
  bool leaf = true;
  int64_t extent = 1;  // for a tuple: the product of its children's extents
  int64_t stride = 0;  // leaves only
  std::vector<Mode> children;
  int depth = 0;       // 1 + the deepest child's, for tuples

  static Mode make_leaf(int64_t extent, int64_t stride) { return Mode{true, extent, stride, {}, 0}; }
  // VALUE when the tuple would nest deeper than kMaxLayoutDepth.
  static Mode make_tuple(std::vector<Mode> children);
  bool operator==(const Mode& o) const;
};

struct Leaf {
  int64_t extent;
  int64_t stride;
};

// The one rule for sizes and strides, applied to every layout however it is
// made: its size (the product of the extents) and its index span
// (1 + the sum over leaves of |stride| * (extent - 1)) must both fit in
// int64, VALUE otherwise. Then every index, every partial sum of one, the
// cosize and every first-mode-fastest ordinal fit in int64 too.
class Layout : public Object {
 public:
  explicit Layout(std::vector<Mode> modes);

  static Ref<Layout> make(std::vector<Mode> modes) { return make_ref<Layout>(std::move(modes)); }
  static Ref<Layout> flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride);
  static Ref<Layout> dense(const std::vector<int64_t>& extents);
  static Ref<Layout> parse(const std::string& text);

  size_t rank() const { return modes_.size(); }
  const std::vector<Mode>& modes() const { return modes_; }
  const std::vector<int64_t>& extents() const { return extents_; }
  const std::vector<Leaf>& leaves() const { return leaves_; }
  // Leaves of top-level mode i are leaves()[leaf_begin(i) .. leaf_begin(i+1)).
  size_t leaf_begin(size_t mode) const { return leaf_begin_[mode]; }
  int64_t size() const { return size_; }
  int64_t min_index() const { return min_index_; }
  int64_t max_index() const { return max_index_; }
  // Span of indices reached, negative strides counted by magnitude (VALUE on overflow).
  int64_t cosize() const;
  bool is_injective() const;
  bool is_dense() const;  // exactly the dense first-mode-fastest layout of its extents
  // The single stride walking top-level mode `mode`, if its leaves form one
  // affine run (0 when its extent is 1).
  bool mode_stride(size_t mode, int64_t* stride) const;
  bool equals(const Layout& o) const;

  // Index of a per-mode coordinate (count == rank) or a per-leaf coordinate
  // (count == leaves). Throws VALUE/INDEX.
  int64_t index(const int64_t* coord, size_t count) const;
  // Index of the coordinate whose first-mode-fastest ordinal is `ordinal`.
  int64_t index_of_ordinal(int64_t ordinal) const;
  int64_t encode(const int64_t* coord, size_t count) const;
  void decode(int64_t ordinal, int64_t* coord) const;

  Ref<Layout> permute(const std::vector<size_t>& perm) const;
  std::string to_string() const;

 private:
  std::vector<Mode> modes_;
  std::vector<int64_t> extents_;
  std::vector<Leaf> leaves_;
  std::vector<size_t> leaf_begin_;
  int64_t size_ = 1;
  int64_t min_index_ = 0;
  int64_t max_index_ = 0;
};

// Multiplies extents with overflow checking (VALUE on overflow).
int64_t checked_product(const std::vector<int64_t>& extents);

}  // namespace sw
