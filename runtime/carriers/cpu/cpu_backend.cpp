// CPU kernels: copy/convert, reductions, matmul, masked copies, top-k
// selection, gather and scatter-add, and the backend that dispatches them
// with the elementwise op tables (cpu_elementwise.cpp, cpu_compare.cpp), all
// driven by the one strided iteration engine (cpu_kernels.hpp) and
// parallelised over the runtime's pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "base/error.hpp"
#include "carriers/cpu/cpu_backend.hpp"
#include "carriers/cpu/cpu_carrier.hpp"
#include "carriers/cpu/cpu_kernels.hpp"
#include "carriers/cpu/gemm.hpp"
#include "carriers/cpu/qgemm.hpp"
#include "core/dtype.hpp"
#include "core/interleave.hpp"
#include "core/iteration.hpp"
#include "core/quant.hpp"
#include "ops/backend.hpp"

namespace sw::cpu {
namespace {

// A floating value as an integer: truncated toward zero, saturating at the
// type's range, NaN as 0 (defined for every input, unlike a C cast).
template <typename I>
I saturate(double v) {
  if (v != v) return I(0);
  if (v <= static_cast<double>(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// One element converted from dtype S to dtype D: integers to integers
// modulo 2^bits, to bool as != 0, floating to integers by saturate().
template <sw_dtype_t D, sw_dtype_t S>
typename Elem<D>::T convert(typename Elem<S>::T x) {
  using DT = typename Elem<D>::T;
  if constexpr (D == S) {
    return x;
  } else if constexpr (D == SW_DTYPE_BOOL) {
    if constexpr (S == SW_DTYPE_F32 || S == SW_DTYPE_F64) return x != 0;
    else if constexpr (kIsHalf<S>) return Elem<S>::get(x) != 0.0;
    else return x != 0;
  } else if constexpr (S == SW_DTYPE_BOOL) {
    return Elem<D>::put(x ? 1.0 : 0.0);
  } else if constexpr (kIsInteger<D> && kIsInteger<S>) {
    return static_cast<DT>(x);
  } else if constexpr (kIsInteger<D>) {
    return saturate<DT>(Elem<S>::get(x));
  } else if constexpr (kIsInteger<S>) {
    if constexpr (D == SW_DTYPE_F32 || D == SW_DTYPE_F64) return static_cast<DT>(x);
    else return Elem<D>::put(static_cast<float>(x));
  } else if constexpr (D == SW_DTYPE_F32 && S == SW_DTYPE_BF16) {
    return bf16_to_f32(x);
  } else {
    return Elem<D>::put(Elem<S>::get(x));
  }
}

// ---- copy / convert --------------------------------------------------------

void quant_copy(const Tensor& src, const Tensor& dst);

// One run of n elements converted from dtype S to dtype D, `so` and `sx`
// apart (in elements). Only this loop is made per pair of dtypes; the
// walk over the tensors around it is shared by all of them.
template <sw_dtype_t D, sw_dtype_t S>
void convert_run(std::byte* out, const std::byte* in, int64_t n, int64_t so, int64_t sx) {
  auto* o = reinterpret_cast<typename Elem<D>::T*>(out);
  const auto* x = reinterpret_cast<const typename Elem<S>::T*>(in);
  if (so == 1 && sx == 1) {  // the common case, as a loop the compiler vectorizes
    for (int64_t i = 0; i < n; ++i) o[i] = convert<D, S>(x[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i * so] = convert<D, S>(x[i * sx]);
}

using ConvertRun = void (*)(std::byte*, const std::byte*, int64_t, int64_t, int64_t);

ConvertRun convert_run_for(sw_dtype_t d, sw_dtype_t s) {
  ConvertRun run = nullptr;
  dispatch_dtype(d, [&](auto dd) {
    dispatch_dtype(s, [&](auto sd) { run = &convert_run<decltype(dd)::value, decltype(sd)::value>; });
  });
  return run;
}

// A copy whose destination runs along one dimension and whose source along
// another (a transposition, as copying a row-major array into a dense
// first-mode-fastest tensor is): walked run by run, every source element of
// a run lies a whole row away from the next, each cache line read serves
// one element and the conversion cannot be vectorized. In kTile x kTile
// tiles instead: the tile's source rows are converted whole (contiguous,
// vectorized) into a buffer, which is then written to the destination
// transposed, its columns contiguous. False (nothing copied) when the copy
// is not one (tile_dim finds no dimension along which the source runs).
constexpr int64_t kTile = 64;

template <typename T>
void store_tile_transposed(const std::byte* tile, int64_t rows, int64_t cols, std::byte* out, int64_t column_stride) {
  const T* t = reinterpret_cast<const T*>(tile);
  T* o = reinterpret_cast<T*>(out);
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) o[r + c * column_stride] = t[r * cols + c];
}

bool copy_transposed(const Iteration& it, ConvertRun run, std::byte* d, const std::byte* s, int64_t ds, int64_t ss,
                     ThreadPool& pool) {
  const size_t j = tile_dim(it);
  if (!j || it.dims[0].stride[1] == 1) return false;
  const IterDim &di = it.dims[0], &dj = it.dims[j];
  auto store = ds == 1 ? &store_tile_transposed<uint8_t>
             : ds == 2 ? &store_tile_transposed<uint16_t>
             : ds == 4 ? &store_tile_transposed<uint32_t>
                       : &store_tile_transposed<uint64_t>;
  const Iteration rest = tile_positions(it, j);
  const int64_t ti = (di.extent + kTile - 1) / kTile, tj = (dj.extent + kTile - 1) / kTile;
  pool.parallel_for(rest.total * ti * tj, std::max<int64_t>(1, kGrain / (kTile * kTile)), [&](int64_t lo, int64_t hi) {
    alignas(64) std::byte tile[kTile * kTile * 8];
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t bj = t % tj, bi = t / tj % ti, i0 = bi * kTile, j0 = bj * kTile;
      const int64_t rows = std::min(kTile, di.extent - i0), cols = std::min(kTile, dj.extent - j0);
      walk(rest, t / (tj * ti), t / (tj * ti) + 1, [&](const int64_t* off, int64_t, const int64_t*) {
        for (int64_t i = 0; i < rows; ++i)
          run(tile + i * cols * ds, s + (off[1] + (i0 + i) * di.stride[1] + j0) * ss, cols, 1, 1);
        store(tile, rows, cols, d + (off[0] + i0 + j0 * dj.stride[0]) * ds, dj.stride[0]);
      });
    }
  });
  return true;
}

void copy_into(const Tensor& src, const Tensor& dst) {
  if (dtype_is_quantized(src.dtype()) || dtype_is_quantized(dst.dtype())) return quant_copy(src, dst);
  const ConvertRun run = convert_run_for(dst.dtype(), src.dtype());
  const bool same = dst.dtype() == src.dtype();
  const auto ds = static_cast<int64_t>(dtype_size(dst.dtype())), ss = static_cast<int64_t>(dtype_size(src.dtype()));
  std::byte* d = dst.host_base();
  const std::byte* s = src.host_base();
  // Iterate dst first: it is dense, so materialising is never needed here.
  std::vector<const Layout*> layouts{&dst.layout(), &src.layout()};
  Iteration it;
  if (!build_iteration(layouts, &it)) {
    // Element by element through ordinals: slow but total.
    const int64_t n = src.numel();
    for (int64_t o = 0; o < n; ++o)
      run(d + dst.layout().index_of_ordinal(o) * ds, s + src.layout().index_of_ordinal(o) * ss, 1, 1, 1);
    return;
  }
  if (copy_transposed(it, run, d, s, ds, ss, dst.runtime().compute())) return;
  dst.runtime().compute().parallel_for(it.total, kGrain, [&](int64_t b, int64_t e) {
    walk(it, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      if (same && st[0] == 1 && st[1] == 1) {
        std::memcpy(d + off[0] * ds, s + off[1] * ss, static_cast<size_t>(n * ds));
        return;
      }
      run(d + off[0] * ds, s + off[1] * ss, n, st[0], st[1]);
    });
  });
}

// ---- block-quantized copies and conversions ---------------------------------
// Blocks move whole, as bytes, through the tensors' storage-unit views; a
// conversion goes through dense f32 values, blocks in parallel.

constexpr int64_t kQuantGrain = 64;  // blocks per parallel task

// Blocks of `src` into `dst` (one quantized dtype, any layouts that keep
// whole blocks).
void copy_blocks(const Tensor& src, const Tensor& dst) {
  const Tensor::Units su = src.units(), du = dst.units();
  const auto es = static_cast<int64_t>(su.unit_bytes);
  const std::byte* s = src.host_base();
  std::byte* d = dst.host_base();
  Iteration it;
  if (!build_iteration({du.layout.get(), su.layout.get()}, &it)) {
    const int64_t n = su.layout->size();
    for (int64_t o = 0; o < n; ++o)
      std::memcpy(d + du.layout->index_of_ordinal(o) * es, s + su.layout->index_of_ordinal(o) * es, su.unit_bytes);
    return;
  }
  dst.runtime().compute().parallel_for(it.total, kQuantGrain, [&](int64_t b, int64_t e) {
    walk(it, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      if (st[0] == 1 && st[1] == 1) {
        std::memcpy(d + off[0] * es, s + off[1] * es, static_cast<size_t>(n * es));
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(d + (off[0] + i * st[0]) * es, s + (off[1] + i * st[1]) * es, su.unit_bytes);
    });
  });
}

Ref<Tensor> dense_like(const Tensor& t, sw_dtype_t dtype) {
  return Tensor::dense_over(make_ref<CpuCarrier>(t.runtime_ref(), dtype, static_cast<size_t>(t.numel())), t.shape());
}

void quant_copy(const Tensor& src, const Tensor& dst) {
  const sw_dtype_t sd = src.dtype(), dd = dst.dtype();
  if (sd == dd) return copy_blocks(src, dst);
  if (dtype_is_quantized(dd)) quant::check_quantizer(dd);
  ThreadPool& pool = dst.runtime().compute();
  // The values as dense f32, first mode fastest: block i holds elements
  // [i * B, (i + 1) * B) of both.
  Ref<Tensor> values;
  if (dtype_is_quantized(sd)) {
    const int64_t B = dtype_block_elements(sd), blocks = src.numel() / B;
    Ref<Tensor> packed;
    if (!src.layout().is_dense()) {
      packed = dense_like(src, sd);
      copy_blocks(src, *packed);
    }
    const std::byte* from = packed ? packed->host_base() : src.host_base();
    const bool in_place = dd == SW_DTYPE_F32 && dst.layout().is_dense();
    values = in_place ? Ref<Tensor>() : dense_like(src, SW_DTYPE_F32);
    float* to = reinterpret_cast<float*>(in_place ? dst.host_base() : values->host_base());
    const size_t bb = dtype_block_bytes(sd);
    pool.parallel_for(blocks, kQuantGrain, [&](int64_t lo, int64_t hi) {
      quant::dequantize(sd, from + static_cast<size_t>(lo) * bb, hi - lo, to + lo * B);
    });
    if (in_place) return;
    if (!dtype_is_quantized(dd)) return copy_into(*values, dst);
  } else if (sd == SW_DTYPE_F32 && src.layout().is_dense()) {
    values = src.view(src.offset(), src.layout_ref());
  } else {
    values = dense_like(src, SW_DTYPE_F32);
    copy_into(src, *values);
  }
  // Quantize the f32 values into dst, or into dense blocks copied there.
  const int64_t B = dtype_block_elements(dd), blocks = dst.numel() / B;
  const bool in_place = dst.layout().is_dense();
  Ref<Tensor> packed = in_place ? Ref<Tensor>() : dense_like(dst, dd);
  std::byte* to = in_place ? dst.host_base() : packed->host_base();
  const float* from = reinterpret_cast<const float*>(values->host_base());
  const size_t bb = dtype_block_bytes(dd);
  pool.parallel_for(blocks, kQuantGrain, [&](int64_t lo, int64_t hi) {
    quant::quantize(dd, from + lo * B, hi - lo, to + static_cast<size_t>(lo) * bb);
  });
  if (!in_place) copy_blocks(*packed, dst);
}

template <typename F>
void dispatch_float(sw_dtype_t d, const char* op, F&& f) {
  if (d == SW_DTYPE_F32) return f(float{});
  if (d == SW_DTYPE_F64) return f(double{});
  internal_error(std::string(op) + ": CPU kernel has no " + dtype_name(d) + " variant");
}

// ---- reductions ---------------------------------------------------------------

struct SumOp {
  template <typename T> static T identity() { return T(0); }
  template <typename T> static T combine(T acc, T x) { return wrap_add(acc, x); }
};
// NaN wins: once the accumulator is NaN, it stays NaN.
struct MaxOp {
  template <typename T> static T identity() {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  template <typename T> static T combine(T acc, T x) { return (x > acc || is_nan(x)) ? x : acc; }
};
struct MinOp {
  template <typename T> static T identity() {
    if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  }
  template <typename T> static T combine(T acc, T x) { return (x < acc || is_nan(x)) ? x : acc; }
};

template <typename T>
T sum_contiguous(const T* x, int64_t n) {
  T acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
  T r = 0;
  for (; i < n; ++i) r += x[i];
  for (int j = 0; j < 16; ++j) r += acc[j];
  return r;
}

template <typename T, typename Op>
void reduce_block(T* o, const T* x, int64_t n, const int64_t* st) {
  if (st[0] == 0) {
    if constexpr (std::is_same_v<Op, SumOp> && std::is_floating_point_v<T>) {
      if (st[1] == 1) {
        *o += sum_contiguous(x, n);
        return;
      }
    }
    T r = Op::template identity<T>();
    for (int64_t i = 0; i < n; ++i) r = Op::combine(r, x[i * st[1]]);
    *o = Op::combine(*o, r);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i * st[0]] = Op::combine(o[i * st[0]], x[i * st[1]]);
  }
}

template <typename T, typename Op>
void reduce_typed(const Tensor& a, const Tensor& out) {
  // View `out` with a's extents: stride 0 on every reduced mode.
  std::vector<int64_t> stride(a.rank());
  int64_t s = 1;
  for (size_t i = 0; i < a.rank(); ++i) {
    const bool reduced = out.shape()[i] == 1 && a.shape()[i] != 1;
    stride[i] = reduced ? 0 : s;
    s *= out.shape()[i];
  }
  Ref<Tensor> out_view = out.view(out.offset(), Layout::flat(a.shape(), stride));
  std::vector<const Tensor*> ops{out_view.get(), &a};
  std::vector<Ref<Tensor>> holders;
  Iteration it = iterate(ops, holders, materialise_dense);
  T* o0 = base_of<T>(out);
  const T* a0 = base_of<T>(*ops[1]);
  const int64_t out_n = out.numel();
  const T identity = Op::template identity<T>();
  std::fill(o0, o0 + out_n, identity);
  if (it.total == 0) return;
  if (it.dims.empty()) {
    // One element (every extent is 1): nothing to iterate, and no outer dimension.
    *o0 = a0[0];
    return;
  }
  if (out_n == 1) order_by_operand(&it, 1);  // a reduction of everything: read in memory order
  ThreadPool& pool = out.runtime().compute();
  const IterDim& outer = it.dims.back();
  const int64_t inner = it.total / outer.extent;
  if (outer.stride[0] != 0 && outer.extent >= static_cast<int64_t>(pool.threads())) {
    // Disjoint outputs per outer index: no partial results needed.
    pool.parallel_for(outer.extent, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, inner)),
                      [&](int64_t lo, int64_t hi) {
                        walk(it, lo * inner, hi * inner, [&](const int64_t* off, int64_t n, const int64_t* st) {
                          reduce_block<T, Op>(o0 + off[0], a0 + off[1], n, st);
                        });
                      });
    return;
  }
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(pool.threads(), it.total / kGrain));
  std::vector<std::unique_ptr<T[]>> partial(parts);
  pool.parallel_for(parts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      T* dst = o0;
      if (p > 0) {
        partial[p].reset(new T[out_n]);
        std::fill(partial[p].get(), partial[p].get() + out_n, identity);
        dst = partial[p].get();
      }
      const int64_t b = it.total * p / parts, e = it.total * (p + 1) / parts;
      walk(it, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
        reduce_block<T, Op>(dst + off[0], a0 + off[1], n, st);
      });
    }
  });
  for (int64_t p = 1; p < parts; ++p)
    for (int64_t i = 0; i < out_n; ++i) o0[i] = Op::combine(o0[i], partial[p][i]);
}

// ---- matmul ---------------------------------------------------------------------

// Column-major access to a rows x cols matrix with strides (sr, sc), if the
// GEMM can take it: one mode of unit stride, the other's at least its extent.
bool as_gemm(int64_t rows, int64_t cols, int64_t sr, int64_t sc, gemm::Matrix* m) {
  if (rows == 1) sr = 1;
  if (cols == 1) sc = std::max<int64_t>(rows, 1);
  if (sr == 1 && sc >= std::max<int64_t>(1, rows)) {
    m->transposed = false;
    m->ld = sc;
    return true;
  }
  if (sc == 1 && sr >= std::max<int64_t>(1, cols)) {
    m->transposed = true;
    m->ld = sr;
    return true;
  }
  if (cols == 1 && sr == 1) {
    m->transposed = false;
    m->ld = std::max<int64_t>(rows, 1);
    return true;
  }
  return false;
}

// The single (extent, stride) walking modes [0, count) of `l` in order, if
// they form one affine run.
bool fused_modes(const Layout& l, size_t count, int64_t* extent, int64_t* stride) {
  int64_t e = 1, s = 0, expect = 0;
  bool have = false;
  for (size_t k = 0; k < l.leaf_begin(count); ++k) {
    const Leaf& leaf = l.leaves()[k];
    e *= leaf.extent;
    if (leaf.extent == 1) continue;
    if (!have) {
      s = leaf.stride;
      expect = s * leaf.extent;
      have = true;
    } else if (leaf.stride != expect) {
      return false;
    } else {
      expect *= leaf.extent;
    }
  }
  *extent = e;
  *stride = have ? s : 0;
  return true;
}

bool all_broadcast(const Layout& l, size_t count) {
  for (size_t k = 0; k < l.leaf_begin(count); ++k)
    if (l.leaves()[k].extent != 1 && l.leaves()[k].stride != 0) return false;
  return true;
}

void matmul_impl(const Tensor& a, const Tensor& b, const Tensor& out, std::vector<gemm::Product>* later = nullptr);

// Batch modes that only `a` walks (b is broadcast over them) fold into M when
// a's and out's batch and M modes are one affine run: one GEMM of batches*M
// rows instead of a loop. Dense first-mode-fastest results put the batch
// modes right before M in memory, so a compact expert stack times shared
// tokens takes this path.
bool matmul_fold_batches(const Tensor& a, const Tensor& b, const Tensor& out) {
  const size_t r = out.rank();
  if (r < 3 || !all_broadcast(b.layout(), r - 2)) return false;
  int64_t ae, as, oe, os;
  if (!fused_modes(a.layout(), r - 1, &ae, &as) || !fused_modes(out.layout(), r - 1, &oe, &os)) return false;
  if (ae != oe || ae > INT32_MAX || (os != 1 && oe != 1)) return false;
  auto a2 = a.view(a.offset(), Layout::make({Mode::make_leaf(ae, as), a.layout().modes()[r - 1]}));
  auto b2 = b.view(b.offset(), Layout::make({b.layout().modes()[r - 2], b.layout().modes()[r - 1]}));
  auto o2 = out.view(out.offset(), Layout::make({Mode::make_leaf(oe, os), out.layout().modes()[r - 1]}));
  matmul_impl(*a2, *b2, *o2);
  return true;
}

// A dense tensor with several batches interleaves them: its batch modes come
// first, fastest, so batch s's element i is at s + S * i. Moves its S
// matrices into (or out of) S contiguous blocks in one vectorised pass.
void move_interleaved(ThreadPool& pool, std::byte* packed, const std::byte* parts0, int64_t S, int64_t count, size_t es,
                      bool to_packed) {
  std::vector<std::byte*> parts(S);
  for (int64_t s = 0; s < S; ++s) parts[s] = const_cast<std::byte*>(parts0) + s * count * static_cast<int64_t>(es);
  pool.parallel_for(count, std::max<int64_t>(1, kGrain / S), [&](int64_t lo, int64_t hi) {
    interleave_elements(packed, parts.data(), S, lo, hi, es, to_packed, false);
  });
}

// Products whose weights `b` are block-quantized (the expert ops on
// quantized tiles): a (m, K) f32 with any strides, b (K, N) whole blocks
// along K with its columns at one stride, out (m, N) f32. X is quantized
// once per distinct operand `a` and weight dtype (the layouts differ), then
// all products run as one job.
void quantized_matmuls(const std::vector<ComputeBackend::MatmulCall>& calls) {
  std::vector<qgemm::Product> products;
  std::vector<std::unique_ptr<qgemm::Activations>> xs;
  std::vector<const Tensor*> x_of;  // the operand each of xs quantizes
  std::vector<sw_dtype_t> x_for;     // and the weights' dtype it is laid out for
  auto stride_of = [](const Tensor& t, size_t mode) {
    int64_t s = 0;
    if (!t.layout().mode_stride(mode, &s)) internal_error("matmul: a quantized product's operand is not strided");
    return s;
  };
  for (const ComputeBackend::MatmulCall& c : calls) {
    const Tensor &a = *c.a, &b = *c.b, &out = *c.out;
    if (a.rank() != 2 || b.rank() != 2 || out.rank() != 2 || a.dtype() != SW_DTYPE_F32 || out.dtype() != SW_DTYPE_F32)
      internal_error("matmul: a quantized product takes (m, K) f32 times (K, N) blocks into (m, N) f32");
    const int64_t m = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
    const Tensor::Units u = b.units();
    int64_t run = 0, ldw = 0;
    if (!u.layout->mode_stride(0, &run) || !u.layout->mode_stride(1, &ldw) || (run != 1 && K > dtype_block_elements(b.dtype())))
      internal_error("matmul: quantized weights must be whole blocks along K, their columns at one stride");
    size_t xi = 0;
    while (xi < x_of.size() && !(&x_of[xi]->carrier() == &a.carrier() && x_of[xi]->offset() == a.offset() &&
                                 x_of[xi]->layout().equals(a.layout()) &&
                                 x_for[xi] == b.dtype()))
      ++xi;
    if (xi == x_of.size()) {
      xs.push_back(std::make_unique<qgemm::Activations>());
      x_of.push_back(&a);
      x_for.push_back(b.dtype());
      qgemm::quantize_rows(b.dtype(), reinterpret_cast<const float*>(a.host_base()), stride_of(a, 0), stride_of(a, 1), m, K,
                           xs.back().get());
    }
    products.push_back({b.dtype(), b.carrier().host_data() + static_cast<size_t>(u.offset) * u.unit_bytes,
                        ldw * static_cast<int64_t>(u.unit_bytes), N, xs[xi].get(),
                        reinterpret_cast<float*>(out.host_base()), stride_of(out, 0), stride_of(out, 1)});
  }
  if (products.empty()) return;
  qgemm::multiply_all(calls[0].out->runtime().compute(), products.data(), products.size());
}

// With `later`, a single product whose operands and result are read and
// written in place is appended there instead of run (matmuls runs them
// together); any other runs here.
void matmul_impl(const Tensor& a, const Tensor& b, const Tensor& out, std::vector<gemm::Product>* later) {
  const size_t r = out.rank();
  const int64_t M = out.shape()[r - 2], N = out.shape()[r - 1], K = a.shape()[r - 1];
  if (std::max({M, N, K}) > INT32_MAX) value_error("matmul: a dimension exceeds the GEMM limit of 2^31 - 1");
  const sw_dtype_t in = a.dtype(), res = out.dtype();
  const int64_t ei = static_cast<int64_t>(dtype_size(in)), eo = static_cast<int64_t>(dtype_size(res));
  int64_t batches = 1;
  std::vector<int64_t> batch_extents(out.shape().begin(), out.shape().end() - 2);
  for (int64_t e : batch_extents) batches *= e;
  if (out.numel() == 0) return;
  std::byte* obase = out.host_base();
  if (K == 0) {  // out is dense; the operands have no element to index
    std::memset(obase, 0, out.numel() * eo);
    return;
  }
  if (batches > 1 && matmul_fold_batches(a, b, out)) return;
  auto rt = out.runtime_ref();
  ThreadPool& pool = out.runtime().compute();
  // Per-operand views of one batch's matrix: modes (r-2, r-1) only.
  auto matrix_layout = [&](const Layout& l) {
    return Layout::make({l.modes()[r - 2], l.modes()[r - 1]});
  };
  Ref<Layout> la = matrix_layout(a.layout()), lb = matrix_layout(b.layout()), lo = matrix_layout(out.layout());
  auto gemm_view = [&](const Ref<Layout>& ml, int64_t rows, int64_t cols, gemm::Matrix* m) {
    int64_t sr, sc;
    return ml->mode_stride(0, &sr) && ml->mode_stride(1, &sc) && as_gemm(rows, cols, sr, sc, m);
  };
  // Each batch's matrix is read in place when it has a unit-stride mode. A
  // dense operand whose batches interleave (an expert stack with the expert
  // mode fastest) is moved into contiguous matrices first, whole; any other
  // layout is packed batch by batch. All in the operand's own dtype.
  auto unpacked = [&](const Tensor& t, const Ref<Layout>& ml, int64_t rows, int64_t cols) -> Ref<Tensor> {
    gemm::Matrix m{};
    if (batches == 1 || gemm_view(ml, rows, cols, &m) || !t.layout().is_dense() ||
        !std::equal(batch_extents.begin(), batch_extents.end(), t.shape().begin()))
      return nullptr;
    auto parts = cpu_backend().empty(rt, in, {rows * cols * batches});
    move_interleaved(pool, t.host_base(), parts->host_base(), batches, rows * cols, ei, false);
    return parts;
  };
  const Ref<Tensor> a_parts = unpacked(a, la, M, K), b_parts = unpacked(b, lb, K, N);
  // The dense result interleaves its batches the same way: each is computed
  // into its own block, and the blocks are interleaved into `out` at the end.
  if (batches > 1 && !out.layout().is_dense()) internal_error("matmul: a batched result must be dense");
  const Ref<Tensor> out_parts = batches > 1 ? cpu_backend().empty(rt, res, {M * N * batches}) : nullptr;
  Ref<Layout> batch_l = Layout::dense(batch_extents);
  std::vector<int64_t> coord(r, 0);
  Ref<Tensor> ta, tb, tc;  // reused packing buffers
  for (int64_t bi = 0; bi < batches; ++bi) {
    if (!batch_extents.empty()) batch_l->decode(bi, coord.data());
    coord[r - 2] = coord[r - 1] = 0;
    auto operand = [&](const Tensor& t, const Ref<Layout>& ml, const Ref<Tensor>& parts, int64_t rows, int64_t cols,
                       Ref<Tensor>& pack) -> gemm::Matrix {
      const int64_t ld = std::max<int64_t>(rows, 1);
      if (parts) return gemm::Matrix{parts->host_base() + bi * rows * cols * ei, false, ld};
      const int64_t off = t.offset() + t.layout().index(coord.data(), r);
      gemm::Matrix m{};
      if (gemm_view(ml, rows, cols, &m)) {
        m.data = t.carrier().host_data() + off * ei;
        return m;
      }
      if (!pack) pack = cpu_backend().empty(rt, in, {rows, cols});
      copy_into(*t.view(off, ml), *pack);
      return gemm::Matrix{pack->host_base(), false, ld};
    };
    const gemm::Matrix ma = operand(a, la, a_parts, M, K, ta);
    const gemm::Matrix mb = operand(b, lb, b_parts, K, N, tb);
    std::byte* cptr;
    int64_t ldc = std::max<int64_t>(M, 1), sr, sc;
    if (out_parts) {
      cptr = out_parts->host_base() + bi * M * N * eo;
    } else if (lo->mode_stride(0, &sr) && lo->mode_stride(1, &sc) && (sr == 1 || M == 1) &&
               (N == 1 || sc >= std::max<int64_t>(M, 1))) {
      cptr = obase;
      if (N != 1) ldc = sc;
    } else {
      if (!tc) tc = cpu_backend().empty(rt, res, {M, N});
      cptr = tc->host_base();
    }
    if (later && batches == 1 && !ta && !tb && !tc) {
      later->push_back(gemm::Product{ma, mb, M, N, K, cptr, ldc});
      return;
    }
    gemm::multiply(pool, in, ma, mb, M, N, K, res, cptr, ldc);
    if (tc) copy_into(*tc, *out.view(out.offset(), lo));
  }
  if (out_parts) move_interleaved(pool, obase, out_parts->host_base(), batches, M * N, eo, true);
}

// ---- masked copy, select_k, gather, scatter_add ----------------------------------------

// Kernels that only move elements take them by size.
template <typename F>
void dispatch_size(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint64_t{}); return;
    default: internal_error("kernel: bad element size");
  }
}

// The stride of every top-level mode (they must be progressions: the op
// definitions pass such operands to select_k, gather and scatter_add).
std::vector<int64_t> mode_strides(const Tensor& t, const char* op) {
  std::vector<int64_t> s(t.rank());
  for (size_t m = 0; m < t.rank(); ++m)
    if (!t.layout().mode_stride(m, &s[m])) internal_error(std::string(op) + ": an operand mode is not a progression");
  return s;
}

void masked_copy_impl(const Tensor& cond, const Tensor& a, const Tensor& out) {
  std::vector<const Tensor*> ops{&out, &cond, &a};
  std::vector<Ref<Tensor>> holders;
  Iteration it = iterate(ops, holders, materialise_dense);
  dispatch_size(dtype_size(out.dtype()), [&](auto zero) {
    using T = decltype(zero);
    T* o0 = base_of<T>(*ops[0]);
    const uint8_t* c0 = base_of<uint8_t>(*ops[1]);
    const T* a0 = base_of<T>(*ops[2]);
    out.runtime().compute().parallel_for(it.total, kGrain, [&](int64_t lo, int64_t hi) {
      walk(it, lo, hi, [&](const int64_t* off, int64_t n, const int64_t* st) {
        T* o = o0 + off[0];
        const uint8_t* c = c0 + off[1];
        const T* x = a0 + off[2];
        for (int64_t i = 0; i < n; ++i)
          if (c[i * st[1]]) o[i * st[0]] = x[i * st[2]];
      });
    });
  });
}

template <typename T>
void select_k_typed(const Tensor& a, int64_t k, size_t axis, bool largest, const Tensor& values,
                    const Tensor& indices) {
  const std::vector<int64_t> sa = mode_strides(a, "select_k"), so = mode_strides(values, "select_k");
  std::vector<int64_t> outer = a.shape();
  outer[axis] = 1;
  const int64_t n = a.shape()[axis], rows = checked_product(outer);
  const Ref<Layout> rows_a = Layout::flat(outer, sa), rows_o = Layout::flat(outer, so);
  const int64_t step_a = sa[axis], step_o = so[axis];
  const T* a0 = base_of<T>(a);
  T* v0 = base_of<T>(values);
  int64_t* i0 = base_of<int64_t>(indices);
  // NaN is the most extreme value either way; ties go to the lower index.
  auto before = [largest](T x, int64_t i, T y, int64_t j) {
    const bool nx = is_nan(x), ny = is_nan(y);
    if (nx != ny) return nx;
    if (!nx && x != y) return largest ? x > y : x < y;
    return i < j;
  };
  values.runtime().compute().parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)),
                                          [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t r = lo; r < hi; ++r) {
      const T* row = a0 + rows_a->index_of_ordinal(r);
      const int64_t at = rows_o->index_of_ordinal(r);
      for (int64_t i = 0; i < n; ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t i, int64_t j) {
        return before(row[i * step_a], i, row[j * step_a], j);
      });
      for (int64_t j = 0; j < k; ++j) {
        v0[at + j * step_o] = row[order[j] * step_a];
        i0[at + j * step_o] = order[j];
      }
    }
  });
}

// The iteration of (first, index, third) where `index` may be any layout:
// an index whose nested modes refine with neither is made dense first.
Iteration index_iteration(const Layout& first, const Tensor*& index, const Layout& third, Ref<Tensor>& holder) {
  Iteration it;
  if (build_iteration({&first, &index->layout(), &third}, &it)) return it;
  std::vector<Ref<Tensor>> holders;
  materialise_dense(*index, holders);
  holder = holders.back();
  index = holder.get();
  if (!build_iteration({&first, &index->layout(), &third}, &it)) internal_error("index operands failed to iterate");
  return it;
}

// INDEX for the first index outside [0, extent), before anything is written.
template <typename I>
void check_indices(const Iteration& it, const I* x0, int64_t extent, size_t axis) {
  walk(it, 0, it.total, [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      const I v = x0[off[1] + i * st[1]];
      if (v < 0 || static_cast<int64_t>(v) >= extent)
        index_error("index " + std::to_string(static_cast<int64_t>(v)) + " is out of range for axis " +
                    std::to_string(axis) + " of extent " + std::to_string(extent));
    }
  });
}

template <typename I, typename T>
void gather_typed(const Tensor& a, size_t axis, const Tensor& index_in, const Tensor& out) {
  std::vector<int64_t> sa = mode_strides(a, "gather");
  const int64_t extent = a.shape()[axis], step = sa[axis];
  sa[axis] = 0;
  const Ref<Layout> la = Layout::flat(index_in.shape(), sa);
  const Tensor* index = &index_in;
  Ref<Tensor> holder;
  const Iteration it = index_iteration(out.layout(), index, *la, holder);
  const I* x0 = base_of<I>(*index);
  const T* a0 = base_of<T>(a);
  T* o0 = base_of<T>(out);
  check_indices(it, x0, extent, axis);
  out.runtime().compute().parallel_for(it.total, kGrain, [&](int64_t lo, int64_t hi) {
    walk(it, lo, hi, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i)
        o0[off[0] + i * st[0]] = a0[off[2] + i * st[2] + static_cast<int64_t>(x0[off[1] + i * st[1]]) * step];
    });
  });
}

template <typename I, typename T>
void scatter_add_typed(const Tensor& out, size_t axis, const Tensor& index_in, const Tensor& src) {
  std::vector<int64_t> so = mode_strides(out, "scatter_add");
  const int64_t extent = out.shape()[axis], step = so[axis];
  so[axis] = 0;
  const Ref<Layout> lo = Layout::flat(index_in.shape(), so);
  const Tensor* index = &index_in;
  Ref<Tensor> holder;
  // (src, index, out) walk together: src may need no copy, out is flat.
  std::vector<const Tensor*> ops{&src};
  std::vector<Ref<Tensor>> holders;
  Iteration it;
  if (!build_iteration({&src.layout(), &index->layout(), lo.get()}, &it)) {
    materialise_dense(src, holders);
    ops[0] = holders.back().get();
  }
  it = index_iteration(ops[0]->layout(), index, *lo, holder);
  const I* x0 = base_of<I>(*index);
  const T* s0 = base_of<T>(*ops[0]);
  T* o0 = base_of<T>(out);
  check_indices(it, x0, extent, axis);
  // In order, on this thread: duplicates accumulate deterministically.
  walk(it, 0, it.total, [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      T& o = o0[off[2] + i * st[2] + static_cast<int64_t>(x0[off[1] + i * st[1]]) * step];
      o = wrap_add(o, s0[off[0] + i * st[0]]);
    }
  });
}

template <typename F>
void dispatch_index(sw_dtype_t d, F&& f) {
  if (d == SW_DTYPE_I32) return f(int32_t{});
  if (d == SW_DTYPE_I64) return f(int64_t{});
  internal_error(std::string("index kernel given a ") + dtype_name(d) + " index");
}

class CpuBackend final : public ComputeBackend {
 public:
  const char* name() const override { return "CPU"; }
  Ref<Tensor> empty(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) override {
    return Tensor::dense_over(make_ref<CpuCarrier>(rt, dtype, static_cast<size_t>(checked_product(extents))), extents);
  }
  Ref<Tensor> zeros(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) override {
    return Tensor::dense_over(CpuCarrier::zeros(rt, dtype, static_cast<size_t>(checked_product(extents))), extents);
  }
  Ref<Carrier> read_target(const Ref<Runtime>& rt, sw_dtype_t dtype, size_t size, size_t phase) override {
    return make_ref<CpuCarrier>(rt, dtype, size, phase);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    if (is_comparison(op)) return compare_kernel(op, a, b, out);
    binary_kernel(op, a, b, out);
  }
  void unary(UnaryOp op, const Tensor& a, double scalar, const Tensor& out) override {
    if (op == UnaryOp::kCopy) return copy_into(a, out);
    unary_kernel(op, a, scalar, out);
  }
  void reduce_sum(const Tensor& a, const Tensor& out) override {
    dispatch_float(out.dtype(), "reduce_sum", [&](auto zero) { reduce_typed<decltype(zero), SumOp>(a, out); });
  }
  void reduce(ReduceOp op, const Tensor& a, const Tensor& out) override {
    dispatch_compute(out.dtype(), "reduce", [&](auto dt) {
      constexpr sw_dtype_t D = decltype(dt)::value;
      using T = typename Elem<D>::T;
      switch (op) {
        case ReduceOp::kSum:
          if constexpr (D == SW_DTYPE_BOOL) internal_error("CPU reduce: no bool sum");
          else reduce_typed<T, SumOp>(a, out);
          return;
        case ReduceOp::kMax: return reduce_typed<T, MaxOp>(a, out);
        case ReduceOp::kMin: return reduce_typed<T, MinOp>(a, out);
      }
    });
  }
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override {
    if (dtype_is_quantized(b.dtype())) return quantized_matmuls({{&a, &b, &out}});
    matmul_impl(a, b, out);
  }
  void matmuls(const std::vector<MatmulCall>& calls) override {
    if (!calls.empty() && dtype_is_quantized(calls[0].b->dtype())) return quantized_matmuls(calls);
    // Products of one operand dtype and one result dtype go together.
    std::vector<gemm::Product> later;
    for (const MatmulCall& c : calls) {
      const bool same = calls[0].a->dtype() == c.a->dtype() && calls[0].out->dtype() == c.out->dtype();
      matmul_impl(*c.a, *c.b, *c.out, same ? &later : nullptr);
    }
    if (later.empty()) return;
    ThreadPool& pool = calls[0].out->runtime().compute();
    gemm::multiply_all(pool, calls[0].a->dtype(), calls[0].out->dtype(), later.data(), later.size());
  }
  void masked_copy(const Tensor& cond, const Tensor& a, const Tensor& out) override {
    masked_copy_impl(cond, a, out);
  }
  void select_k(const Tensor& a, int64_t k, size_t axis, bool largest, const Tensor& values,
                const Tensor& indices) override {
    dispatch_compute(a.dtype(), "select_k", [&](auto dt) {
      select_k_typed<typename Elem<decltype(dt)::value>::T>(a, k, axis, largest, values, indices);
    });
  }
  void gather(const Tensor& a, size_t axis, const Tensor& index, const Tensor& out) override {
    dispatch_index(index.dtype(), [&](auto i) {
      dispatch_size(dtype_size(a.dtype()), [&](auto t) { gather_typed<decltype(i), decltype(t)>(a, axis, index, out); });
    });
  }
  void scatter_add(const Tensor& out, size_t axis, const Tensor& index, const Tensor& src) override {
    dispatch_index(index.dtype(), [&](auto i) {
      dispatch_compute(out.dtype(), "scatter_add", [&](auto dt) {
        constexpr sw_dtype_t D = decltype(dt)::value;
        if constexpr (D == SW_DTYPE_BOOL) internal_error("CPU scatter_add: no bool variant");
        else scatter_add_typed<decltype(i), typename Elem<D>::T>(out, axis, index, src);
      });
    });
  }
};

}  // namespace

void materialise_dense(const Tensor& t, std::vector<Ref<Tensor>>& holders) {
  auto d = cpu_backend().empty(t.runtime_ref(), t.dtype(), t.shape());
  copy_into(t, *d);
  holders.push_back(d);
}

}  // namespace sw::cpu

namespace sw {

ComputeBackend& cpu_backend() {
  static cpu::CpuBackend backend;  // stateless
  return backend;
}

}  // namespace sw
