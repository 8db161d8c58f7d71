#include "core/layout.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "base/error.hpp"

namespace sw {

static int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) value_error("layout size overflows 64 bits");
  return r;
}

int64_t checked_product(const std::vector<int64_t>& extents) {
  int64_t p = 1;
  for (int64_t e : extents) p = mul_checked(p, e);
  return p;
}

static void depth_error() {
  value_error("layout nesting exceeds the limit of " + std::to_string(kMaxLayoutDepth) + " levels");
}

Mode Mode::make_tuple(std::vector<Mode> children) {
  Mode m;
  m.leaf = false;
  m.extent = 1;
  m.depth = 1;
  for (const Mode& c : children) {
    m.extent = mul_checked(m.extent, c.extent);
    m.depth = std::max(m.depth, c.depth + 1);
  }
  if (m.depth > kMaxLayoutDepth) depth_error();
  m.children = std::move(children);
  return m;
}

bool Mode::operator==(const Mode& o) const {
  if (leaf != o.leaf) return false;
  if (leaf) return extent == o.extent && stride == o.stride;
  return children == o.children;
}

static void flatten(const Mode& m, std::vector<Leaf>* out) {
  if (m.leaf) {
    out->push_back({m.extent, m.stride});
    return;
  }
  for (const Mode& c : m.children) flatten(c, out);
}

Layout::Layout(std::vector<Mode> modes) : Object(ObjectKind::kLayout), modes_(std::move(modes)) {
  size_ = 1;
  for (const Mode& m : modes_) {
    if (m.leaf && m.extent < 0) value_error("layout extents must be >= 0, got " + std::to_string(m.extent));
    extents_.push_back(m.extent);
    leaf_begin_.push_back(leaves_.size());
    flatten(m, &leaves_);
    size_ = mul_checked(size_, m.extent);
  }
  leaf_begin_.push_back(leaves_.size());
  for (const Leaf& l : leaves_)
    if (l.extent < 0) value_error("layout extents must be >= 0, got " + std::to_string(l.extent));
  if (size_ == 0) return;  // reaches no index
  // The span 1 + sum |stride| * (extent - 1) must fit in int64: computed in
  // 128 bits, where no term can overflow.
  __int128 span = 1, lo = 0, hi = 0;
  constexpr __int128 kMax = INT64_MAX;
  for (const Leaf& l : leaves_) {
    const __int128 reach = static_cast<__int128>(l.stride) * (l.extent - 1);
    (reach < 0 ? lo : hi) += reach;
    span += reach < 0 ? -reach : reach;
    if (span > kMax)
      value_error("layout index span overflows 64 bits: 1 + the sum of |stride| * (extent - 1) over its leaves exceeds " +
                  std::to_string(INT64_MAX));
  }
  min_index_ = static_cast<int64_t>(lo);
  max_index_ = static_cast<int64_t>(hi);
}

Ref<Layout> Layout::flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  std::vector<Mode> modes;
  for (size_t i = 0; i < shape.size(); ++i) modes.push_back(Mode::make_leaf(shape[i], stride[i]));
  return make(std::move(modes));
}

Ref<Layout> Layout::dense(const std::vector<int64_t>& extents) {
  std::vector<int64_t> stride(extents.size());
  int64_t s = 1;
  for (size_t i = 0; i < extents.size(); ++i) {
    if (extents[i] < 0) value_error("extents must be >= 0, got " + std::to_string(extents[i]));
    stride[i] = s;
    s = mul_checked(s, std::max<int64_t>(extents[i], 1));
  }
  return flat(extents, stride);
}

bool Layout::is_dense() const {
  int64_t s = 1;
  for (size_t i = 0; i < modes_.size(); ++i) {
    const Mode& m = modes_[i];
    if (!m.leaf) return false;
    if (m.extent != 1 && m.stride != s) return false;
    s *= m.extent;
  }
  return true;
}

bool Layout::mode_stride(size_t mode, int64_t* stride) const {
  int64_t s = 0, expect = 0;
  bool have = false;
  for (size_t k = leaf_begin_[mode]; k < leaf_begin_[mode + 1]; ++k) {
    const Leaf& leaf = leaves_[k];
    if (leaf.extent == 1) continue;
    if (!have) {
      s = leaf.stride;
      expect = s * leaf.extent;
      have = true;
    } else {
      if (leaf.stride != expect) return false;
      expect *= leaf.extent;
    }
  }
  *stride = have ? s : 0;
  return true;
}

bool Layout::equals(const Layout& o) const { return modes_ == o.modes_; }

int64_t Layout::cosize() const {
  if (size_ == 0) return 0;
  // Negative strides count by magnitude: the span from the lowest to the
  // highest index reached, which is 1 + sum |stride| * (extent - 1).
  int64_t span, cosize;
  if (__builtin_sub_overflow(max_index_, min_index_, &span) || __builtin_add_overflow(span, 1, &cosize))
    value_error("layout cosize overflows 64 bits");
  return cosize;
}

bool Layout::is_injective() const {
  if (size_ <= 1) return true;
  std::vector<Leaf> ls;
  for (const Leaf& l : leaves_)
    if (l.extent > 1) {
      if (l.stride == 0) return false;
      // A negative stride is a reflection of its coordinate plus a constant:
      // injectivity holds or fails as for its magnitude.
      ls.push_back({l.extent, l.stride < 0 ? -l.stride : l.stride});
    }
  std::sort(ls.begin(), ls.end(), [](const Leaf& a, const Leaf& b) { return a.stride < b.stride; });
  // Leaves [nested, end) each exceed the span of every smaller one: they
  // cannot collide, so only the leaves below need an exact check.
  size_t nested = ls.size();
  {
    std::vector<int64_t> below(ls.size() + 1, 0);  // span of leaves [0, i)
    for (size_t i = 0; i < ls.size(); ++i) below[i + 1] = below[i] + ls[i].stride * (ls[i].extent - 1);
    while (nested > 0 && ls[nested - 1].stride > below[nested - 1]) --nested;
  }
  if (nested <= 1) return true;
  // Exact check of leaves [0, nested): their index set built leaf by leaf,
  // smallest stride first, stopping at the first collision (found early
  // for the usual non-injective layouts: overlapping small strides).
  int64_t count = 1;
  for (size_t i = 0; i < nested; ++i)
    if (__builtin_mul_overflow(count, ls[i].extent, &count) || count > (int64_t{1} << 22))
      return false;  // too many offsets to sort in well under a second: not proven injective
  std::vector<int64_t> set{0}, next;
  for (size_t i = 0; i < nested; ++i) {
    next.clear();
    next.reserve(set.size() * static_cast<size_t>(ls[i].extent));
    for (int64_t c = 0; c < ls[i].extent; ++c)
      for (int64_t v : set) next.push_back(v + c * ls[i].stride);
    std::sort(next.begin(), next.end());
    if (std::adjacent_find(next.begin(), next.end()) != next.end()) return false;
    set.swap(next);
  }
  return true;
}

static void check_coord(int64_t c, int64_t extent, size_t axis) {
  if (c < 0 || c >= extent)
    index_error("coordinate " + std::to_string(c) + " is out of range for mode " + std::to_string(axis) +
                " of extent " + std::to_string(extent));
}

int64_t Layout::index(const int64_t* coord, size_t count) const {
  // Every coordinate is checked before any is used: in range, the sum
  // cannot overflow (see the size rule above).
  if (count == modes_.size()) {
    for (size_t i = 0; i < modes_.size(); ++i) check_coord(coord[i], extents_[i], i);
    int64_t r = 0;
    for (size_t i = 0; i < modes_.size(); ++i) {
      int64_t c = coord[i];
      for (size_t k = leaf_begin_[i]; k < leaf_begin_[i + 1]; ++k) {
        const Leaf& l = leaves_[k];
        r += (c % l.extent) * l.stride;
        c /= l.extent;
      }
    }
    return r;
  }
  if (count == leaves_.size()) {
    for (size_t k = 0; k < leaves_.size(); ++k) check_coord(coord[k], leaves_[k].extent, k);
    int64_t r = 0;
    for (size_t k = 0; k < leaves_.size(); ++k) r += coord[k] * leaves_[k].stride;
    return r;
  }
  value_error("coordinate has " + std::to_string(count) + " entries; the layout has rank " +
              std::to_string(modes_.size()) + " and " + std::to_string(leaves_.size()) + " leaves");
}

int64_t Layout::index_of_ordinal(int64_t ordinal) const {
  int64_t r = 0;
  for (const Leaf& l : leaves_) {
    r += (ordinal % l.extent) * l.stride;
    ordinal /= l.extent;
  }
  return r;
}

int64_t Layout::encode(const int64_t* coord, size_t count) const {
  if (count != modes_.size())
    value_error("coordinate has " + std::to_string(count) + " entries; the shape has rank " +
                std::to_string(modes_.size()));
  for (size_t i = 0; i < count; ++i) check_coord(coord[i], extents_[i], i);
  int64_t r = 0, scale = 1;
  for (size_t i = 0; i < count; ++i) {
    r += coord[i] * scale;
    scale *= extents_[i];
  }
  return r;
}

void Layout::decode(int64_t ordinal, int64_t* coord) const {
  if (ordinal < 0 || ordinal >= size_)
    index_error("ordinal " + std::to_string(ordinal) + " is out of range for size " + std::to_string(size_));
  for (size_t i = 0; i < modes_.size(); ++i) {
    coord[i] = ordinal % extents_[i];
    ordinal /= extents_[i];
  }
}

Ref<Layout> Layout::permute(const std::vector<size_t>& perm) const {
  if (perm.size() != modes_.size())
    value_error("permutation has " + std::to_string(perm.size()) + " entries for rank " +
                std::to_string(modes_.size()));
  std::vector<bool> seen(perm.size(), false);
  std::vector<Mode> modes;
  for (size_t p : perm) {
    if (p >= perm.size()) index_error("permutation entry " + std::to_string(p) + " is out of range");
    if (seen[p]) value_error("permutation repeats mode " + std::to_string(p));
    seen[p] = true;
    modes.push_back(modes_[p]);
  }
  return make(std::move(modes));
}

static void print_tree(const Mode& m, bool stride, std::string* out) {
  if (m.leaf) {
    *out += std::to_string(stride ? m.stride : m.extent);
    return;
  }
  *out += '(';
  for (size_t i = 0; i < m.children.size(); ++i) {
    if (i) *out += ',';
    print_tree(m.children[i], stride, out);
  }
  *out += ')';
}

std::string Layout::to_string() const {
  // The top level prints as a tuple of the modes, without building one (a
  // tuple of the modes could nest one level too deep).
  auto print = [&](bool stride, std::string* out) {
    *out += '(';
    for (size_t i = 0; i < modes_.size(); ++i) {
      if (i) *out += ',';
      print_tree(modes_[i], stride, out);
    }
    *out += ')';
  };
  std::string s;
  print(false, &s);
  s += ':';
  print(true, &s);
  return s;
}

// A tree of integers used while parsing.
struct IntTree {
  bool leaf = true;
  int64_t value = 0;
  std::vector<IntTree> children;
};

class Parser {
 public:
  explicit Parser(const std::string& t) : t_(t) {}
  IntTree tree(int depth = 0) {
    skip();
    IntTree n;
    if (pos_ < t_.size() && t_[pos_] == '(') {
      // Refused before recursing: nesting never costs more stack than this.
      // The outermost parentheses group the top-level modes, which may
      // each nest kMaxLayoutDepth levels.
      if (depth > kMaxLayoutDepth)
        fail("layout nesting exceeds the limit of " + std::to_string(kMaxLayoutDepth) + " levels");
      ++pos_;
      n.leaf = false;
      skip();
      if (peek() == ')') { ++pos_; return n; }
      for (;;) {
        n.children.push_back(tree(depth + 1));
        skip();
        const char c = peek();
        if (c != ')' && c != ',') fail("expected ',' or ')'");  // report the offending character
        ++pos_;
        if (c == ')') break;
      }
      return n;
    }
    size_t start = pos_;
    if (peek() == '-' || peek() == '+') ++pos_;
    while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
    if (pos_ == start || !std::isdigit(static_cast<unsigned char>(t_[pos_ - 1]))) {
      pos_ = start;
      fail("expected an integer or '('");
    }
    errno = 0;
    n.value = std::strtoll(t_.c_str() + start, nullptr, 10);
    if (errno == ERANGE) fail("integer out of range");
    return n;
  }
  void expect(char c) {
    skip();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void end() {
    skip();
    if (pos_ != t_.size()) fail("unexpected trailing text");
  }
  [[noreturn]] void fail(const std::string& what) {
    // Long text is quoted by its start only: the position locates the rest.
    constexpr size_t kQuote = 64;
    const std::string quoted = t_.size() <= kQuote ? t_ : t_.substr(0, kQuote) + "...";
    value_error("cannot parse layout \"" + quoted + "\" at position " + std::to_string(pos_) + ": " + what);
  }

 private:
  char peek() const { return pos_ < t_.size() ? t_[pos_] : '\0'; }
  void skip() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
  }
  const std::string& t_;
  size_t pos_ = 0;
};

static Mode zip(const IntTree& s, const IntTree& d, Parser& p) {
  if (s.leaf != d.leaf || s.children.size() != d.children.size()) p.fail("shape and stride are not congruent");
  if (s.leaf) {
    if (s.value < 0) p.fail("negative extent");
    return Mode::make_leaf(s.value, d.value);
  }
  std::vector<Mode> ch;
  for (size_t i = 0; i < s.children.size(); ++i) ch.push_back(zip(s.children[i], d.children[i], p));
  return Mode::make_tuple(std::move(ch));
}

Ref<Layout> Layout::parse(const std::string& text) {
  Parser p(text);
  IntTree s = p.tree();
  p.expect(':');
  IntTree d = p.tree();
  p.end();
  if (s.leaf != d.leaf || s.children.size() != d.children.size()) p.fail("shape and stride are not congruent");
  if (s.leaf) return make({zip(s, d, p)});
  std::vector<Mode> modes;
  for (size_t i = 0; i < s.children.size(); ++i) modes.push_back(zip(s.children[i], d.children[i], p));
  return make(std::move(modes));
}

}  // namespace sw
