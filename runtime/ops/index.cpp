// Index ops: index_select and gather, their scatter-add adjoints index_add
// and scatter_add, and cat / stack, with their VJPs.
#include "ops/op_util.hpp"

namespace sw::ops {
namespace {

void check_index_dtype(const char* op, const Tensor& index) {
  if (index.dtype() != SW_DTYPE_I32 && index.dtype() != SW_DTYPE_I64)
    type_error(std::string(op) + ": the index must be an i32 or i64 tensor, not " + dtype_name(index.dtype()));
}

// A rank-0 or rank-1 index of `n` entries as the index of gather /
// scatter_add over `shape` (its extent n along `axis`): stride 0 elsewhere.
Ref<Tensor> spread_index(const Tensor& index, const std::vector<int64_t>& shape, size_t axis) {
  std::vector<Mode> modes;
  for (size_t i = 0; i < shape.size(); ++i)
    modes.push_back(i == axis ? (index.rank() ? index.layout().modes()[0] : Mode::make_leaf(1, 0))
                              : Mode::make_leaf(shape[i], 0));
  return index.view(index.offset(), Layout::make(std::move(modes)));
}

// `t` restricted to its first `extents` elements along each mode.
Ref<Tensor> leading(const Ref<Tensor>& t, const std::vector<int64_t>& extents) {
  Ref<Tensor> f = flat_modes(t);
  if (f->shape() == extents) return f;
  std::vector<int64_t> strides(f->rank());
  for (size_t m = 0; m < f->rank(); ++m) f->layout().mode_stride(m, &strides[m]);
  return f->view(f->offset(), Layout::flat(extents, strides));
}

// gather / scatter_add of `index` (extents `ix`) against an operand of
// `shape`: the same rank, and every extent but `axis`'s at most shape's.
void check_gather_shapes(const char* op, const std::vector<int64_t>& ix, const std::vector<int64_t>& shape, size_t axis,
                         const char* what) {
  if (ix.size() != shape.size())
    value_error(std::string(op) + ": the index has rank " + std::to_string(ix.size()) + ", the " + what + " rank " +
                std::to_string(shape.size()));
  for (size_t i = 0; i < ix.size(); ++i)
    if (i != axis && ix[i] > shape[i])
      value_error(std::string(op) + ": the index's extent " + std::to_string(ix[i]) + " along mode " + std::to_string(i) +
                  " exceeds the " + what + "'s " + std::to_string(shape[i]));
}

// The raw kernels: `a` gathered along `axis` by a full-rank `index`, and
// `src` (index's extents) added into a copy of `base` in `dtype`.
Ref<Tensor> gather_raw(const Ref<Tensor>& a, size_t axis, const Ref<Tensor>& index) {
  std::vector<int64_t> ext = index->shape();
  ext[axis] = a->shape()[axis];
  auto src = leading(a, ext);
  auto out = backend_of(*a).empty(a->runtime_ref(), a->dtype(), index->shape());
  if (out->numel()) backend_of(*a).gather(*src, axis, *index, *out);
  return out;
}

Ref<Tensor> scatter_add_raw(const Ref<Tensor>& base, size_t axis, const Ref<Tensor>& index, const Ref<Tensor>& src,
                            sw_dtype_t dtype) {
  auto out = copy_as(*base, dtype);
  if (index->numel()) backend_of(*out).scatter_add(*out, axis, *index, *leading(as_dtype(src, dtype), index->shape()));
  return out;
}

void check_values_dtype(const char* op, sw_dtype_t d) {
  if (d == SW_DTYPE_BOOL) type_error(std::string(op) + " of bool tensors is not supported; convert them first");
}

Ref<Tensor> vector_index(const char* op, const Ref<Tensor>& index) {
  if (index->rank() > 1)
    value_error(std::string(op) + ": the index must have rank 0 or 1, not " + std::to_string(index->rank()));
  return index;
}

}  // namespace

Ref<Tensor> index_select(const Ref<Tensor>& a, int64_t axis_in, const Ref<Tensor>& index) {
  require_plain("index_select", {a.get(), index.get()});
  auto pins = check_operands("index_select", {a.get(), index.get()});
  check_index_dtype("index_select", *index);
  vector_index("index_select", index);
  if (a->rank() == 0) index_error("index_select: a rank-0 tensor has no axis " + std::to_string(axis_in));
  const size_t axis = normalize_axis(axis_in, a->rank(), "index_select");
  std::vector<int64_t> shape = a->shape();
  shape[axis] = index->numel();
  auto out = gather_raw(a, axis, spread_index(*index, shape, axis));
  const std::vector<int64_t> in_shape = a->shape();
  const sw_dtype_t d = a->dtype();
  record(out, "index_select", {a.get()}, {index}, [=](const Ref<Tensor>& g, const FnNode& n) {
    const sw_dtype_t gc = compute_dtype(g->dtype());
    auto z = zeros_like_shape(*g, gc, in_shape);
    auto idx = spread_index(*n.value(0), g->shape(), axis);
    return std::vector<Ref<Tensor>>{as_dtype(scatter_add_raw(z, axis, idx, g, gc), d)};
  });
  return out;
}

Ref<Tensor> gather(const Ref<Tensor>& a, int64_t axis_in, const Ref<Tensor>& index) {
  require_plain("gather", {a.get(), index.get()});
  auto pins = check_operands("gather", {a.get(), index.get()});
  check_index_dtype("gather", *index);
  if (a->rank() == 0) index_error("gather: a rank-0 tensor has no axis " + std::to_string(axis_in));
  const size_t axis = normalize_axis(axis_in, a->rank(), "gather");
  check_gather_shapes("gather", index->shape(), a->shape(), axis, "input");
  auto out = gather_raw(a, axis, index);
  const std::vector<int64_t> in_shape = a->shape();
  const sw_dtype_t d = a->dtype();
  record(out, "gather", {a.get()}, {index}, [=](const Ref<Tensor>& g, const FnNode& n) {
    const sw_dtype_t gc = compute_dtype(g->dtype());
    auto z = zeros_like_shape(*g, gc, in_shape);
    return std::vector<Ref<Tensor>>{as_dtype(scatter_add_raw(z, axis, n.value(0), g, gc), d)};
  });
  return out;
}

Ref<Tensor> index_add(const Ref<Tensor>& a, int64_t axis_in, const Ref<Tensor>& index, const Ref<Tensor>& source) {
  require_plain("index_add", {a.get(), index.get(), source.get()});
  auto pins = check_operands("index_add", {a.get(), index.get(), source.get()});
  check_index_dtype("index_add", *index);
  vector_index("index_add", index);
  if (a->dtype() != source->dtype())
    type_error(std::string("index_add: the tensor (") + dtype_name(a->dtype()) + ") and the source (" +
               dtype_name(source->dtype()) + ") must have the same dtype");
  check_values_dtype("index_add", a->dtype());
  if (a->rank() == 0) index_error("index_add: a rank-0 tensor has no axis " + std::to_string(axis_in));
  const size_t axis = normalize_axis(axis_in, a->rank(), "index_add");
  std::vector<int64_t> expect = a->shape();
  expect[axis] = index->numel();
  if (source->shape() != expect)
    value_error("index_add: the source has shape " + shape_text(source->shape()) + "; " + shape_text(expect) +
                " was expected (the tensor's, with one entry per index along the axis)");
  const sw_dtype_t d = a->dtype(), c = compute_dtype(d);
  auto out = as_dtype(scatter_add_raw(a, axis, spread_index(*index, expect, axis), source, c), d);
  record(out, "index_add", {a.get(), source.get()}, {index}, [=](const Ref<Tensor>& g, const FnNode& n) {
    Ref<Tensor> gs;
    if (n.needs(1)) gs = as_dtype(gather_raw(g, axis, spread_index(*n.value(0), expect, axis)), d);
    return std::vector<Ref<Tensor>>{n.needs(0) ? as_dtype(g, d) : nullptr, gs};
  });
  return out;
}

Ref<Tensor> scatter_add(const Ref<Tensor>& a, int64_t axis_in, const Ref<Tensor>& index, const Ref<Tensor>& source) {
  require_plain("scatter_add", {a.get(), index.get(), source.get()});
  auto pins = check_operands("scatter_add", {a.get(), index.get(), source.get()});
  check_index_dtype("scatter_add", *index);
  if (a->dtype() != source->dtype())
    type_error(std::string("scatter_add: the tensor (") + dtype_name(a->dtype()) + ") and the source (" +
               dtype_name(source->dtype()) + ") must have the same dtype");
  check_values_dtype("scatter_add", a->dtype());
  if (a->rank() == 0) index_error("scatter_add: a rank-0 tensor has no axis " + std::to_string(axis_in));
  const size_t axis = normalize_axis(axis_in, a->rank(), "scatter_add");
  check_gather_shapes("scatter_add", index->shape(), a->shape(), axis, "tensor");
  check_gather_shapes("scatter_add", index->shape(), source->shape(), source->rank(), "source");
  if (index->shape()[axis] > source->shape()[axis])
    value_error("scatter_add: the index's extent along the axis exceeds the source's");
  const sw_dtype_t d = a->dtype(), c = compute_dtype(d);
  auto out = as_dtype(scatter_add_raw(a, axis, index, source, c), d);
  const std::vector<int64_t> ss = source->shape();
  record(out, "scatter_add", {a.get(), source.get()}, {index}, [=](const Ref<Tensor>& g, const FnNode& n) {
    Ref<Tensor> gs;
    if (n.needs(1)) {
      auto idx = n.value(0);
      auto picked = gather_raw(g, axis, idx);
      if (idx->shape() == ss) {
        gs = as_dtype(picked, d);
      } else {  // the source's elements outside the index's extents took no part
        auto z = zeros_like_shape(*g, d, ss);
        backend_of(*z).unary(UnaryOp::kCopy, *picked, 0.0, *leading(z, idx->shape()));
        gs = z;
      }
    }
    return std::vector<Ref<Tensor>>{n.needs(0) ? as_dtype(g, d) : nullptr, gs};
  });
  return out;
}

Ref<Tensor> cat(const std::vector<Ref<Tensor>>& ts, int64_t axis_in) {
  if (ts.empty()) value_error("cat: no tensors given");
  std::vector<const Tensor*> ptrs;
  for (const auto& t : ts) ptrs.push_back(t.get());
  require_plain("cat", ptrs);
  auto pins = check_operands("cat", ptrs);
  const size_t rank = ts[0]->rank();
  if (rank == 0) value_error("cat: rank-0 tensors cannot be concatenated; stack them instead");
  const size_t axis = normalize_axis(axis_in, rank, "cat");
  std::vector<int64_t> shape = ts[0]->shape();
  shape[axis] = 0;
  sw_dtype_t dtype = ts[0]->dtype();
  for (size_t k = 0; k < ts.size(); ++k) {
    const Tensor& t = *ts[k];
    if (t.rank() != rank)
      value_error("cat: tensor " + std::to_string(k) + " has rank " + std::to_string(t.rank()) + ", tensor 0 rank " +
                  std::to_string(rank));
    for (size_t i = 0; i < rank; ++i)
      if (i != axis && t.shape()[i] != ts[0]->shape()[i])
        value_error("cat: tensor " + std::to_string(k) + " has shape " + shape_text(t.shape()) +
                    ", which differs from tensor 0's " + shape_text(ts[0]->shape()) + " off the axis");
    shape[axis] += t.shape()[axis];
    dtype = promote_types(dtype, t.dtype());
  }
  ComputeBackend& be = backend_of(*ts[0]);
  auto out = be.empty(ts[0]->runtime_ref(), dtype, shape);
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const auto& t : ts) {
    starts.push_back(at);
    const int64_t n = t->shape()[axis];
    if (n && t->numel())
      be.unary(UnaryOp::kCopy, *t, 0.0, *slice(out->view(0, out->layout_ref()), static_cast<int64_t>(axis), at, at + n, 1));
    at += n;
  }
  std::vector<int64_t> lengths;
  std::vector<sw_dtype_t> dtypes;
  for (const auto& t : ts) {
    lengths.push_back(t->shape()[axis]);
    dtypes.push_back(t->dtype());
  }
  record(out, "cat", ptrs, {}, [=](const Ref<Tensor>& g, const FnNode& n) {
    std::vector<Ref<Tensor>> gs(lengths.size());
    NoGradGuard no_grad;
    for (size_t k = 0; k < lengths.size(); ++k)
      if (n.needs(k))
        gs[k] = as_dtype(slice(g, static_cast<int64_t>(axis), starts[k], starts[k] + lengths[k], 1), dtypes[k]);
    return gs;
  });
  return out;
}

Ref<Tensor> stack(const std::vector<Ref<Tensor>>& ts, int64_t axis_in) {
  if (ts.empty()) value_error("stack: no tensors given");
  const size_t rank = ts[0]->rank();
  for (size_t k = 0; k < ts.size(); ++k)
    if (ts[k]->shape() != ts[0]->shape())
      value_error("stack: tensor " + std::to_string(k) + " has shape " + shape_text(ts[k]->shape()) +
                  ", tensor 0 " + shape_text(ts[0]->shape()) + "; stacked tensors need one shape");
  if (rank >= SW_MAX_RANK)
    value_error("stack: the result would exceed the maximum rank of " + std::to_string(SW_MAX_RANK));
  const int64_t axis = static_cast<int64_t>(normalize_axis(axis_in, rank + 1, "stack"));
  std::vector<Ref<Tensor>> parts;
  for (const auto& t : ts) parts.push_back(unsqueeze(t, axis));
  return cat(parts, axis);
}

}  // namespace sw::ops
