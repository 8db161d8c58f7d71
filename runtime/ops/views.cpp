// Views (reshape, flatten, unsqueeze, squeeze, expand, slice, select,
// detach) over the same carrier, and copies (contiguous, clone, to_dtype),
// with their VJPs. A view is only new metadata: (offset, layout) over the
// slots its input reaches.
#include <algorithm>

#include "core/quant.hpp"
#include "ops/op_util.hpp"

namespace sw::ops {
namespace {

void check_view_operand(const char* op, const Ref<Tensor>& a) {
  require_plain(op, {a.get()});
  a->carrier().check_live(op);
}

// Explicit extents with one -1 inferred from the element count.
std::vector<int64_t> infer_extents(const std::vector<int64_t>& in, int64_t numel, const char* op) {
  std::vector<int64_t> out = in;
  int64_t known = 1;
  size_t infer = out.size();
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer != out.size()) value_error(std::string(op) + ": only one extent may be -1");
      infer = i;
    } else if (out[i] < 0) {
      value_error(std::string(op) + ": extent " + std::to_string(out[i]) + " is negative");
    } else if (__builtin_mul_overflow(known, out[i], &known)) {
      value_error(std::string(op) + ": the extents' product overflows 64 bits");
    }
  }
  if (infer != out.size()) {
    if (known == 0 || numel % known != 0)
      value_error(std::string(op) + ": cannot infer the -1 extent of " + shape_text(in) + " for " +
                  std::to_string(numel) + " elements");
    out[infer] = numel / known;
    known = numel;
  }
  if (known != numel)
    value_error(std::string(op) + ": a tensor of " + std::to_string(numel) + " elements cannot take the shape " +
                shape_text(in));
  return out;
}

// A view of `a`'s slots with `modes` from offset `offset`, recorded as a
// view node with `vjp` when `a` requires grad.
Ref<Tensor> make_view(const Ref<Tensor>& a, int64_t offset, std::vector<Mode> modes, const char* name,
                      FnNode::Vjp vjp) {
  auto out = a->view(offset, Layout::make(std::move(modes)));
  record(out, name, {a.get()}, {a}, std::move(vjp), true);
  return out;
}

// The modes of `l`, mode i replaced by `m`.
std::vector<Mode> modes_with(const Layout& l, size_t i, Mode m) {
  std::vector<Mode> modes = l.modes();
  modes[i] = std::move(m);
  return modes;
}

// `g` (a view's cotangent) placed in zeros of the base's shape at the same
// (offset, layout) the view took from a dense base: the VJP of slice and
// select. `place` maps the dense base's layout to the view's.
Ref<Tensor> embed(const Ref<Tensor>& g, const std::vector<int64_t>& shape, sw_dtype_t dtype,
                  const std::function<Ref<Tensor>(const Ref<Tensor>&)>& place) {
  auto z = zeros_like_shape(*g, dtype, shape);
  auto target = place(z);
  if (target->numel()) backend_of(*z).unary(UnaryOp::kCopy, *g, 0.0, *target);
  return z;
}

struct SliceSpec {
  int64_t start = 0, step = 1, count = 0;
};

// Python's slice.indices() for an axis of `n` elements.
SliceSpec normalize_slice(int64_t start, int64_t stop, int64_t step, int64_t n) {
  if (step == 0) value_error("slice: step must not be 0");
  SliceSpec s;
  s.step = step;
  auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v = v < -n ? lo : v + n;  // v < -n also covers INT64_MIN
    return std::clamp(v, lo, hi);
  };
  if (step > 0) {
    s.start = clamp(start, 0, n);
    const int64_t e = clamp(stop, 0, n);
    s.count = e > s.start ? (e - s.start + step - 1) / step : 0;
  } else {
    s.start = clamp(start, -1, n - 1);
    const int64_t e = clamp(stop, -1, n - 1);
    s.count = s.start > e ? (s.start - e - step - 1) / -step : 0;
  }
  return s;
}

// The slice view of `t` along `axis`: same carrier, new offset and mode.
Ref<Tensor> slice_view(const Tensor& t, size_t axis, const SliceSpec& s) {
  const int64_t extent = t.shape()[axis];
  if (s.count == 0) return t.view(t.offset(), Layout::make(modes_with(t.layout(), axis, Mode::make_leaf(0, 0))));
  if (s.start == 0 && s.step == 1 && s.count == extent) return t.view(t.offset(), t.layout_ref());
  // The offset of coordinate `start` along the mode, decoded over its leaves.
  int64_t off = 0, c = s.start;
  for (size_t k = t.layout().leaf_begin(axis); k < t.layout().leaf_begin(axis + 1); ++k) {
    const Leaf& l = t.layout().leaves()[k];
    off += (c % l.extent) * l.stride;
    c /= l.extent;
  }
  if (s.count == 1) return t.view(t.offset() + off, Layout::make(modes_with(t.layout(), axis, Mode::make_leaf(1, 0))));
  int64_t stride;
  if (!t.layout().mode_stride(axis, &stride))
    unsupported_error("slice: mode " + std::to_string(axis) + " of the tensor is nested and does not walk one "
                      "progression, so a strided slice of it has no layout; slice contiguous() instead");
  return t.view(t.offset() + off, Layout::make(modes_with(t.layout(), axis, Mode::make_leaf(s.count, stride * s.step))));
}

// `g` with extent-1 modes inserted at `positions` (sorted, of the result).
Ref<Tensor> insert_units(const Ref<Tensor>& g, const std::vector<size_t>& positions) {
  std::vector<Mode> modes;
  size_t k = 0, p = 0;
  const size_t rank = g->rank() + positions.size();
  for (size_t i = 0; i < rank; ++i) {
    if (p < positions.size() && positions[p] == i) {
      modes.push_back(Mode::make_leaf(1, 0));
      ++p;
    } else {
      modes.push_back(g->layout().modes()[k++]);
    }
  }
  return g->view(g->offset(), Layout::make(std::move(modes)));
}

// `g` without its extent-1 modes at `positions`.
Ref<Tensor> drop_units(const Ref<Tensor>& g, const std::vector<size_t>& positions) {
  std::vector<Mode> modes;
  for (size_t i = 0; i < g->rank(); ++i)
    if (std::find(positions.begin(), positions.end(), i) == positions.end()) modes.push_back(g->layout().modes()[i]);
  return g->view(g->offset(), Layout::make(std::move(modes)));
}

}  // namespace

bool view_layout(const Layout& a, const std::vector<int64_t>& extents, Ref<Layout>* out) {
  // a's leaves in element order (first mode fastest), without extent-1
  // leaves, with neighbours that walk one progression merged.
  std::vector<Leaf> ls;
  for (const Leaf& l : a.leaves()) {
    if (l.extent == 1) continue;
    if (!ls.empty() && l.stride == ls.back().stride * ls.back().extent) {
      ls.back().extent *= l.extent;
      continue;
    }
    ls.push_back(l);
  }
  size_t k = 0;
  std::vector<Mode> modes;
  for (int64_t n : extents) {
    std::vector<Mode> parts;
    int64_t need = n;
    while (need > 1) {
      if (k >= ls.size()) return false;
      Leaf& l = ls[k];
      if (l.extent <= need) {
        if (need % l.extent) return false;
        parts.push_back(Mode::make_leaf(l.extent, l.stride));
        need /= l.extent;
        ++k;
      } else {
        if (l.extent % need) return false;
        parts.push_back(Mode::make_leaf(need, l.stride));
        l.stride *= need;
        l.extent /= need;
        need = 1;
      }
    }
    if (parts.empty()) parts.push_back(Mode::make_leaf(n, 0));
    modes.push_back(parts.size() == 1 ? parts[0] : Mode::make_tuple(std::move(parts)));
  }
  if (k != ls.size()) return false;
  *out = Layout::make(std::move(modes));
  return true;
}

Ref<Tensor> reshape(const Ref<Tensor>& a, const std::vector<int64_t>& extents_in, bool view_only) {
  const char* name = view_only ? "view" : "reshape";
  check_view_operand(name, a);
  if (extents_in.size() > SW_MAX_RANK)
    value_error(std::string(name) + ": rank " + std::to_string(extents_in.size()) + " exceeds the maximum of " +
                std::to_string(SW_MAX_RANK));
  const std::vector<int64_t> extents = infer_extents(extents_in, a->numel(), name);
  const std::vector<int64_t> in_shape = a->shape();
  FnNode::Vjp vjp = [in_shape](const Ref<Tensor>& g, const FnNode&) {
    return std::vector<Ref<Tensor>>{reshape_dense(g, in_shape)};
  };
  Ref<Layout> layout;
  if (a->numel() == 0) layout = Layout::dense(extents);
  if (layout || view_layout(a->layout(), extents, &layout)) {
    auto out = a->view(a->offset(), layout);
    record(out, name, {a.get()}, {a}, vjp, true);
    return out;
  }
  if (view_only)
    value_error("view: no layout over the tensor's slots has the extents " + shape_text(extents) +
                " (merging or splitting modes whose elements are not evenly spaced); use reshape, which copies, "
                "or contiguous() first");
  auto pins = check_operands(name, {a.get()}, true);
  auto out = reshape_dense(copy_as(*a, a->dtype()), extents);
  record(out, name, {a.get()}, {}, vjp);
  return out;
}

Ref<Tensor> flatten(const Ref<Tensor>& a, int64_t start_in, int64_t end_in) {
  check_view_operand("flatten", a);
  if (a->rank() == 0) {
    normalize_axis(start_in, 1, "flatten");
    normalize_axis(end_in, 1, "flatten");
    return reshape(a, {1}, false);
  }
  const size_t start = normalize_axis(start_in, a->rank(), "flatten"), end = normalize_axis(end_in, a->rank(), "flatten");
  if (start > end)
    value_error("flatten: start axis " + std::to_string(start_in) + " comes after end axis " + std::to_string(end_in));
  std::vector<int64_t> extents(a->shape().begin(), a->shape().begin() + static_cast<int64_t>(start));
  int64_t merged = 1;
  for (size_t i = start; i <= end; ++i) merged *= a->shape()[i];
  extents.push_back(merged);
  extents.insert(extents.end(), a->shape().begin() + static_cast<int64_t>(end) + 1, a->shape().end());
  return reshape(a, extents, false);
}

Ref<Tensor> unsqueeze(const Ref<Tensor>& a, int64_t axis_in) {
  check_view_operand("unsqueeze", a);
  if (a->rank() >= SW_MAX_RANK)
    value_error("unsqueeze: the result would exceed the maximum rank of " + std::to_string(SW_MAX_RANK));
  const size_t axis = normalize_axis(axis_in, a->rank() + 1, "unsqueeze");
  std::vector<Mode> modes = a->layout().modes();
  modes.insert(modes.begin() + static_cast<int64_t>(axis), Mode::make_leaf(1, 0));
  return make_view(a, a->offset(), std::move(modes), "unsqueeze", [axis](const Ref<Tensor>& g, const FnNode&) {
    return std::vector<Ref<Tensor>>{drop_units(g, {axis})};
  });
}

Ref<Tensor> squeeze(const Ref<Tensor>& a, const std::vector<int64_t>* axes) {
  check_view_operand("squeeze", a);
  std::vector<bool> drop(a->rank(), false);
  if (axes) {
    for (int64_t ax : *axes) {
      const size_t n = normalize_axis(ax, a->rank(), "squeeze");
      drop[n] = a->shape()[n] == 1;  // a mode of another extent stays, as in PyTorch
    }
  } else {
    for (size_t i = 0; i < a->rank(); ++i) drop[i] = a->shape()[i] == 1;
  }
  std::vector<Mode> modes;
  std::vector<size_t> dropped;
  for (size_t i = 0; i < a->rank(); ++i) {
    if (drop[i])
      dropped.push_back(i);
    else
      modes.push_back(a->layout().modes()[i]);
  }
  return make_view(a, a->offset(), std::move(modes), "squeeze", [dropped](const Ref<Tensor>& g, const FnNode&) {
    return std::vector<Ref<Tensor>>{insert_units(g, dropped)};
  });
}

Ref<Tensor> expand(const Ref<Tensor>& a, const std::vector<int64_t>& extents) {
  check_view_operand("expand", a);
  if (extents.size() < a->rank())
    value_error("expand: " + std::to_string(extents.size()) + " extents given for a tensor of rank " +
                std::to_string(a->rank()));
  if (extents.size() > SW_MAX_RANK)
    value_error("expand: rank " + std::to_string(extents.size()) + " exceeds the maximum of " + std::to_string(SW_MAX_RANK));
  const size_t lead = extents.size() - a->rank();
  std::vector<Mode> modes;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < extents.size(); ++i) {
    const int64_t want = extents[i];
    if (i < lead) {
      if (want < 0) value_error("expand: a new leading mode needs an explicit extent, not " + std::to_string(want));
      modes.push_back(Mode::make_leaf(want, 0));
    } else {
      const int64_t have = a->shape()[i - lead];
      const int64_t e = want == -1 ? have : want;
      if (e < 0) value_error("expand: extent " + std::to_string(want) + " is negative");
      if (e == have) {
        modes.push_back(a->layout().modes()[i - lead]);
      } else if (have == 1) {
        modes.push_back(Mode::make_leaf(e, 0));
      } else {
        value_error("expand: mode " + std::to_string(i - lead) + " of extent " + std::to_string(have) +
                    " cannot be expanded to " + std::to_string(e) + " (only extent-1 modes stretch)");
      }
    }
    shape.push_back(modes.back().extent);
  }
  const std::vector<int64_t> in_shape = a->shape();
  return make_view(a, a->offset(), std::move(modes), "expand", [in_shape](const Ref<Tensor>& g, const FnNode&) {
    return std::vector<Ref<Tensor>>{sum_to(g, in_shape)};
  });
}

Ref<Tensor> slice(const Ref<Tensor>& a, int64_t axis_in, int64_t start, int64_t stop, int64_t step) {
  check_view_operand("slice", a);
  if (a->rank() == 0) index_error("slice: a rank-0 tensor has no axis " + std::to_string(axis_in));
  const size_t axis = normalize_axis(axis_in, a->rank(), "slice");
  const SliceSpec s = normalize_slice(start, stop, step, a->shape()[axis]);
  auto out = slice_view(*a, axis, s);
  const std::vector<int64_t> in_shape = a->shape();
  const sw_dtype_t d = a->dtype();
  record(out, "slice", {a.get()}, {a}, [=](const Ref<Tensor>& g, const FnNode&) {
    return std::vector<Ref<Tensor>>{embed(g, in_shape, d, [&](const Ref<Tensor>& z) { return slice_view(*z, axis, s); })};
  }, true);
  return out;
}

Ref<Tensor> select(const Ref<Tensor>& a, int64_t axis_in, int64_t index) {
  check_view_operand("select", a);
  if (a->rank() == 0) index_error("select: a rank-0 tensor has no axis " + std::to_string(axis_in));
  const size_t axis = normalize_axis(axis_in, a->rank(), "select");
  const int64_t n = a->shape()[axis];
  if (index < -n || index >= n)
    index_error("select: index " + std::to_string(index) + " is out of range for axis " + std::to_string(axis_in) +
                " of extent " + std::to_string(n));
  const int64_t i = index < 0 ? index + n : index;
  auto pick = [axis, i](const Tensor& t) {
    auto one = slice_view(t, axis, SliceSpec{i, 1, 1});
    return drop_units(one, {axis});
  };
  auto out = pick(*a);
  const std::vector<int64_t> in_shape = a->shape();
  const sw_dtype_t d = a->dtype();
  record(out, "select", {a.get()}, {a}, [=](const Ref<Tensor>& g, const FnNode&) {
    return std::vector<Ref<Tensor>>{embed(g, in_shape, d, [&](const Ref<Tensor>& z) { return pick(*z); })};
  }, true);
  return out;
}

Ref<Tensor> contiguous_op(const Ref<Tensor>& a) {
  require_plain("contiguous", {a.get()});
  auto pins = check_operands("contiguous", {a.get()}, true);
  if (a->layout().is_dense()) return a;
  auto out = copy_as(*a, a->dtype());
  record(out, "contiguous", {a.get()}, {}, [](const Ref<Tensor>& g, const FnNode&) { return std::vector<Ref<Tensor>>{g}; });
  return out;
}

Ref<Tensor> clone(const Ref<Tensor>& a) {
  require_plain("clone", {a.get()});
  auto pins = check_operands("clone", {a.get()}, true);
  auto out = copy_as(*a, a->dtype());
  record(out, "clone", {a.get()}, {}, [](const Ref<Tensor>& g, const FnNode&) { return std::vector<Ref<Tensor>>{g}; });
  return out;
}

Ref<Tensor> detach(const Ref<Tensor>& a) {
  check_view_operand("detach", a);
  return a->view(a->offset(), a->layout_ref());
}

Ref<Tensor> to_dtype(const Ref<Tensor>& a, sw_dtype_t dtype) {
  check_dtype(dtype, "to_dtype");
  require_plain("to_dtype", {a.get()});
  auto pins = check_operands("to_dtype", {a.get()}, true);
  if (a->dtype() == dtype) return a;
  if (dtype_is_quantized(dtype)) quant::check_quantizer(dtype);
  auto out = copy_as(*a, dtype);
  const sw_dtype_t d = a->dtype();
  if (dtype_is_float(d))
    record(out, "to_dtype", {a.get()}, {}, [d](const Ref<Tensor>& g, const FnNode&) {
      return std::vector<Ref<Tensor>>{as_dtype(g, d)};
    });
  return out;
}

}  // namespace sw::ops
