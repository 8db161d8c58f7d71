// Vulkan kernels: the ComputeBackend of one Vulkan device. Operands arrive
// broadcast to the output's shape (as for the CPU backend). Each operand's
// layout is coalesced first: a dense run is FLAT (the shader adds the
// invocation index), an all-zero-stride one SCALAR, anything else GENERAL
// (leaves decoded per element). Matmul and reduce_sum read strided operands
// directly, so transposes and broadcasts cost no copies. Outputs are not
// zero-filled: every kernel writes each output slot. Dispatches are recorded
// into the device's batch and submitted when values are read back.
//
// f32 kernels exist for every elementwise op (unary, binary, comparisons,
// where), reductions (sum, max, min) and matmul; f64 ones on devices with
// shaderFloat64, except the exponential ones (GLSL has no double exp);
// f16 and bf16 are stored 16-bit and widened to f32 in the shaders (matmul,
// conversions); a half matmul result is the f32 sums rounded once. Integer
// and bool arithmetic, top-k selection, gather and scatter-add have no
// shader: they fail UNSUPPORTED naming the op and the carrier.
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "carriers/vulkan/vulkan_carrier.hpp"
#include "carriers/vulkan/vulkan_pipelines.hpp"
#include "device/vulkan_backend.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"

namespace sw {
namespace {

using vk::Kernel;
using vk::PipelineKey;
using vk::Push;

constexpr uint32_t kFlat = 0, kScalar = 1, kGeneral = 2, k2D = 3;
constexpr uint32_t kWhereCode = SW_VULKAN_WHERE_CODE;  // binary.comp's masked copy (ops/op_table.def)
constexpr uint32_t kGroup = 256;  // invocations per workgroup of the 1-D kernels
constexpr uint32_t kVec4 = 4;    // 16-byte words per invocation on dense elementwise paths
constexpr int64_t kTileM = 64, kTileN = 64;  // matmul.comp's BM, BN
// Iterations one loop of a shader may run: lavapipe (gallivm) ends any loop
// after 65535 iterations, silently.
constexpr int64_t kMaxLoop = 32768;

// Storage formats of the shaders (common.glsl FMT_*).
enum Fmt : uint32_t { kF32 = 0, kF16 = 1, kBF16 = 2, kF64 = 3, kRaw8 = 4, kRaw16 = 5, kRaw32 = 6, kRaw64 = 7 };

bool value_format(sw_dtype_t d, uint32_t* fmt) {
  switch (d) {
    case SW_DTYPE_F32: *fmt = kF32; return true;
    case SW_DTYPE_F16: *fmt = kF16; return true;
    case SW_DTYPE_BF16: *fmt = kBF16; return true;
    case SW_DTYPE_F64: *fmt = kF64; return true;
    default: return false;
  }
}

uint32_t raw_format(sw_dtype_t d) {
  switch (dtype_size(d)) {
    case 1: return kRaw8;
    case 2: return kRaw16;
    case 4: return kRaw32;
    default: return kRaw64;
  }
}

// Drops extent-1 leaves and merges neighbours that walk one affine run.
std::vector<Leaf> coalesce(const std::vector<Leaf>& leaves) {
  std::vector<Leaf> out;
  for (const Leaf& l : leaves) {
    if (l.extent == 1) continue;
    if (!out.empty() && l.stride == out.back().stride * out.back().extent) {
      out.back().extent *= l.extent;
      continue;
    }
    out.push_back(l);
  }
  return out;
}

// divide() in common.glsl: r / e == (r * magic) >> (32 + shift) for every
// r < 2^31, with l = ceil(log2(e)), magic = ceil(2^(31 + l) / e) < 2^32.
void division_magic(int64_t e, uint32_t* magic, uint32_t* shift) {
  const int l = std::bit_width(static_cast<uint64_t>(e - 1));
  *magic = static_cast<uint32_t>(((uint64_t{1} << (31 + l)) + e - 1) / e);
  *shift = static_cast<uint32_t>(l - 1);
}

// Appends [leaves, (extent, stride, magic, shift) per leaf] to `meta` (every
// extent >= 2, as coalesce() leaves them); returns where it starts.
uint32_t append_leaves(const std::vector<Leaf>& leaves, std::vector<int32_t>& meta) {
  const uint32_t at = static_cast<uint32_t>(meta.size());
  meta.push_back(static_cast<int32_t>(leaves.size()));
  for (const Leaf& l : leaves) {
    uint32_t magic, shift;
    division_magic(l.extent, &magic, &shift);
    meta.push_back(static_cast<int32_t>(l.extent));
    meta.push_back(static_cast<int32_t>(l.stride));
    meta.push_back(static_cast<int32_t>(magic));
    meta.push_back(static_cast<int32_t>(shift));
  }
  return at;
}

struct Operand {
  uint32_t mode = kFlat;
  uint32_t offset = 0;
  uint32_t desc = 0;  // meta word of its leaves (GENERAL)
  Leaf leaf[2] = {};  // its two leaves (2D)
};

// `two_leaves`: the kernel takes 2D operands (two leaves in push constants).
Operand describe(const Tensor& t, std::vector<int32_t>& meta, bool two_leaves = false) {
  Operand op;
  op.offset = static_cast<uint32_t>(t.offset());
  std::vector<Leaf> leaves = coalesce(t.layout().leaves());
  const bool all_zero = std::all_of(leaves.begin(), leaves.end(), [](const Leaf& l) { return l.stride == 0; });
  if (all_zero) {
    op.mode = kScalar;
  } else if (leaves.size() == 1 && leaves[0].stride == 1) {
    op.mode = kFlat;
  } else if (two_leaves && leaves.size() == 2) {
    op.mode = k2D;  // a broadcast row or column, a transpose
    op.leaf[0] = leaves[0];
    op.leaf[1] = leaves[1];
  } else {
    op.mode = kGeneral;
    op.desc = append_leaves(leaves, meta);
  }
  return op;
}

// Push words [at, at + 5) of a 2D operand: e0, s0, s1, magic, shift.
void push_2d(Push& p, uint32_t at, const Operand& o) {
  if (o.mode != k2D) return;
  uint32_t magic, shift;
  division_magic(o.leaf[0].extent, &magic, &shift);
  p.set(at, static_cast<uint32_t>(o.leaf[0].extent));
  p.set_int(at + 1, o.leaf[0].stride);
  p.set_int(at + 2, o.leaf[1].stride);
  p.set(at + 3, magic);
  p.set(at + 4, shift);
}

// Whether an operand can join a 16-byte path: a FLAT one's words line up with
// the output's; others are read element by element.
bool aligned4(const Operand& o) { return o.mode != kFlat || o.offset % 4 == 0; }

// Workgroups (x, y) covering `groups` in a 1-D problem.
void grid(uint64_t groups, uint32_t* gx, uint32_t* gy) {
  *gx = static_cast<uint32_t>(std::min<uint64_t>(std::max<uint64_t>(groups, 1), 65535));
  *gy = static_cast<uint32_t>((groups + *gx - 1) / *gx);
  if (*gy > 65535) unsupported_error("vulkan: a kernel of more than 2^32 workgroups");
}

// A kernel op's OP code in its shader: the op table's, which the shaders
// define as OP_<Name> from the same table (ops/op_table.def).
template <typename Op>
uint32_t vulkan_code(Op op) {
  const int code = kernel_row(op).vulkan;
  if (code < 0) internal_error(std::string("vulkan: no shader op for ") + kernel_row(op).what);
  return static_cast<uint32_t>(code);
}

class VulkanComputeBackend final : public ComputeBackend {
 public:
  VulkanComputeBackend(Device* device, vk::Pipelines* pipelines) : device_(device), pipelines_(pipelines) {}
  const char* name() const override { return "vulkan"; }

  Ref<Tensor> empty(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) override {
    return make(rt, dtype, extents, false);
  }
  Ref<Tensor> zeros(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) override {
    return make(rt, dtype, extents, true);
  }

  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    const char* what = kernel_row(op).what;
    const bool compare = is_comparison(op);
    const bool f64 = compare ? arithmetic(what, {&a, &b}) : arithmetic(what, {&a, &b, &out});
    if (compare) check_carriers(what, {&out});
    if (compare && out.dtype() != SW_DTYPE_BOOL) internal_error("vulkan comparison given a non-bool output");
    if (f64 && (op == BinaryOp::kPow || op == BinaryOp::kSiluGrad || op == BinaryOp::kGeluGrad))
      unsupported_error(std::string("vulkan: ") + what + " of f64 tensors is not supported on a Vulkan carrier (GLSL "
                        "has no double exp); move the tensors to a CPU carrier");
    std::vector<int32_t> meta;
    const Operand da = describe(a, meta, true), db = describe(b, meta, true);
    Push p;
    push_2d(p, 9, da);
    push_2d(p, 14, db);
    p.set(1, static_cast<uint32_t>(out.numel()));
    p.set(2, da.offset);
    p.set(3, db.offset);
    p.set(4, static_cast<uint32_t>(out.offset()));
    p.set(5, da.desc);
    p.set(6, db.desc);
    const uint32_t code = vulkan_code(op);
    if (compare) {
      // One invocation per output word of four bools.
      const uint64_t first = static_cast<uint64_t>(out.offset()), n = static_cast<uint64_t>(out.numel());
      const int64_t words = static_cast<int64_t>((first + n - 1) / 4 - first / 4 + 1);
      return run_1d({Kernel::kBinary, f64, {code, da.mode, db.mode, 0}}, out, a, b, meta, p, words);
    }
    const bool vec4 = !f64 && aligned4(da) && aligned4(db) && out.offset() % 4 == 0;
    const uint32_t per = vec4 ? kVec4 : 0;
    run_1d({Kernel::kBinary, f64, {code, da.mode, db.mode, per}}, out, a, b, meta, p,
           vec4 ? (out.numel() + 4 * per - 1) / (4 * per) : out.numel());
  }

  void unary(UnaryOp op, const Tensor& a, double scalar, const Tensor& out) override {
    if (op == UnaryOp::kCopy) return copy(a, out);
    const char* what = kernel_row(op).what;
    const bool f64 = arithmetic(what, {&a, &out});
    const bool exponential = op == UnaryOp::kExp || op == UnaryOp::kLog || op == UnaryOp::kSilu ||
                             op == UnaryOp::kGelu || op == UnaryOp::kSigmoid || op == UnaryOp::kTanh;
    if (f64 && exponential)
      unsupported_error(std::string("vulkan: ") + what + " of f64 tensors is not supported on a Vulkan carrier (GLSL "
                        "has no double exp or log); move the tensor to a CPU carrier");
    std::vector<int32_t> meta;
    const Operand da = describe(a, meta, true);
    Push p;
    push_2d(p, 9, da);
    p.set(1, static_cast<uint32_t>(out.numel()));
    p.set(2, da.offset);
    p.set(4, static_cast<uint32_t>(out.offset()));
    p.set(5, da.desc);
    if (f64) {
      uint64_t bits;
      std::memcpy(&bits, &scalar, 8);
      p.set(7, static_cast<uint32_t>(bits));
      p.set(8, static_cast<uint32_t>(bits >> 32));
    } else {
      p.set_float(7, static_cast<float>(scalar));  // as the CPU carrier rounds it
    }
    const uint32_t code = vulkan_code(op);
    const uint32_t per = !f64 && aligned4(da) && out.offset() % 4 == 0 ? kVec4 : 0;
    run_1d({Kernel::kUnary, f64, {code, da.mode, kFlat, per}}, out, a, a, meta, p,
           per ? (out.numel() + 4 * per - 1) / (4 * per) : out.numel());
  }

  void masked_copy(const Tensor& cond, const Tensor& a, const Tensor& out) override {
    const bool f64 = arithmetic("where", {&a, &out});
    check_carriers("where", {&cond});
    if (cond.dtype() != SW_DTYPE_BOOL) internal_error("vulkan masked copy given a non-bool condition");
    std::vector<int32_t> meta;
    const Operand da = describe(a, meta, true), dc = describe(cond, meta, true);
    Push p;
    push_2d(p, 9, da);
    push_2d(p, 14, dc);
    p.set(1, static_cast<uint32_t>(out.numel()));
    p.set(2, da.offset);
    p.set(3, dc.offset);
    p.set(4, static_cast<uint32_t>(out.offset()));
    p.set(5, da.desc);
    p.set(6, dc.desc);
    run_1d({Kernel::kBinary, f64, {kWhereCode, da.mode, dc.mode, 0}}, out, a, cond, meta, p, out.numel());
  }

  void select_k(const Tensor&, int64_t, size_t, bool, const Tensor&, const Tensor&) override {
    not_on_vulkan("topk and max / min with indices");
  }
  void gather(const Tensor&, size_t, const Tensor&, const Tensor&) override {
    not_on_vulkan("gather and index_select");
  }
  void scatter_add(const Tensor&, size_t, const Tensor&, const Tensor&) override {
    not_on_vulkan("scatter_add, index_add and their VJPs");
  }

  void reduce_sum(const Tensor& a, const Tensor& out) override { reduce(ReduceOp::kSum, a, out); }

  void reduce(ReduceOp op, const Tensor& a, const Tensor& out) override {
    const char* what = kernel_row(op).what;
    const bool f64 = arithmetic(what, {&a, &out});
    const uint32_t rop = vulkan_code(op);
    // Split a's leaves into kept ones (out's ordinal decodes over them) and
    // reduced ones, each coalesced.
    std::vector<Leaf> kept, reduced;
    const Layout& l = a.layout();
    for (size_t m = 0; m < a.rank(); ++m) {
      const bool r = out.shape()[m] == 1 && a.shape()[m] != 1;
      for (size_t k = l.leaf_begin(m); k < l.leaf_begin(m + 1); ++k) (r ? reduced : kept).push_back(l.leaves()[k]);
    }
    kept = coalesce(kept);
    reduced = coalesce(reduced);
    const int64_t n_out = out.numel();
    int64_t count = 1;
    for (const Leaf& x : reduced) count *= x.extent;
    if (a.numel() == 0) return zero(out);  // a sum; max and min of nothing are refused before
    // Not under the context's mutex: `parts` below is allocated through the
    // device, whose mutex is taken before the context's (launch locks).
    const vk::Context& ctx = context_of(out);
    std::vector<int32_t> meta;
    Push p;
    p.set(1, static_cast<uint32_t>(n_out));
    p.set(2, static_cast<uint32_t>(a.offset()));
    p.set(3, static_cast<uint32_t>(out.offset()));
    uint32_t kept_mode = kFlat;
    if (kept.size() <= 1) {
      p.set_int(10, kept.empty() ? 0 : kept[0].stride);
    } else {
      kept_mode = kGeneral;
      p.set(4, append_leaves(kept, meta));
    }
    const Leaf inner = reduced.empty() ? Leaf{1, 0} : reduced[0];
    const uint32_t outer = reduced.size() > 1;
    if (outer) p.set(5, append_leaves(std::vector<Leaf>(reduced.begin() + 1, reduced.end()), meta));
    p.set(6, static_cast<uint32_t>(inner.extent));
    p.set_int(7, inner.stride);
    p.set(8, static_cast<uint32_t>(count));
    if (outer) {
      uint32_t magic, shift;
      division_magic(inner.extent, &magic, &shift);
      p.set(11, magic);
      p.set(12, shift);
    }
    const int64_t kept_stride = kept.empty() ? 0 : kept[0].stride;
    const uint32_t vec4 = !f64 && op == ReduceOp::kSum && !outer && inner.stride == 1 && kept_mode == kFlat && a.offset() % 4 == 0 &&
                          kept_stride % 4 == 0;
    // One invocation per output when outputs are many, else workgroups of
    // 256 share an output. GPUs also share when an output's slots are
    // contiguous (coalesced reads); CPU devices read them best from one
    // invocation.
    // Loops stay below kMaxLoop iterations per invocation.
    const bool split = count > kMaxLoop || (count >= 1024 && (n_out < 512 || (inner.stride == 1 && !ctx.is_cpu())));
    if (!split) {
      p.set(9, 1);
      return run_1d({Kernel::kReduceSum, f64, {0, kept_mode, outer, vec4, rop}}, out, a, a, meta, p, n_out);
    }
    const int64_t groups = std::max<int64_t>(n_out >= 32 ? 1 : std::clamp<int64_t>(count / 16384, 1, 256),
                                             (count + kGroup * kMaxLoop - 1) / (kGroup * kMaxLoop));
    p.set(9, static_cast<uint32_t>(groups));
    uint32_t gx, gy;
    grid(static_cast<uint64_t>(n_out * groups), &gx, &gy);
    const PipelineKey split_key{Kernel::kReduceSum, f64, {1, kept_mode, outer, vec4, rop}};
    if (groups == 1) return launch(split_key, out, a, a, meta, p, gx, gy, 1);
    // Parts first, then one invocation per output adds its parts.
    Ref<Tensor> parts = empty(out.runtime_ref(), out.dtype(), {n_out * groups});
    p.set(3, 0);
    launch(split_key, *parts, a, a, meta, p, gx, gy, 1);
    Push q;
    q.set(1, static_cast<uint32_t>(n_out));
    q.set(2, 0);
    q.set(3, static_cast<uint32_t>(out.offset()));
    q.set(6, static_cast<uint32_t>(groups));
    q.set_int(7, 1);
    q.set(8, static_cast<uint32_t>(groups));
    q.set(9, 1);
    q.set_int(10, groups);
    run_1d({Kernel::kReduceSum, f64, {0, kFlat, 0, 0, rop}}, out, *parts, *parts, {}, q, n_out);
  }

  void matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out) override {
    check_carriers("matmul", {&a_in, &b_in, &out});
    if (out.dtype() == SW_DTYPE_F16 || out.dtype() == SW_DTYPE_BF16) {
      // The shader stores 32-bit words; a half result is its f32 sums
      // rounded once by the copy kernel (as on the CPU).
      auto sums = make(out.runtime_ref(), SW_DTYPE_F32, out.shape(), false);
      matmul(a_in, b_in, *sums);
      return unary(UnaryOp::kCopy, *sums, 0, out);
    }
    uint32_t fmt = 0;
    if (!value_format(a_in.dtype(), &fmt) || a_in.dtype() != b_in.dtype())
      internal_error("vulkan matmul given " + std::string(dtype_name(a_in.dtype())) + " operands");
    const bool f64 = fmt == kF64;
    if (f64) need_float64("matmul");
    const size_t r = out.rank();
    // Operands whose matrix or batch modes are not one stride each are
    // copied densely first (nested layouts only).
    auto strided = [&](const Tensor& t) {
      int64_t s;
      for (size_t m = 0; m < r; ++m)
        if (!t.layout().mode_stride(m, &s)) return false;
      return true;
    };
    Ref<Tensor> a = strided(a_in) ? Ref<Tensor>(const_cast<Tensor*>(&a_in)) : dense_copy(a_in);
    Ref<Tensor> b = strided(b_in) ? Ref<Tensor>(const_cast<Tensor*>(&b_in)) : dense_copy(b_in);
    if (!strided(out)) internal_error("vulkan matmul given a nested output");
    const int64_t M = out.shape()[r - 2], N = out.shape()[r - 1], K = a->shape()[r - 1];
    auto stride = [](const Tensor& t, size_t m) {
      int64_t s = 0;
      t.layout().mode_stride(m, &s);
      return s;
    };
    std::vector<int32_t> meta{0};
    int64_t batches = 1;
    for (size_t m = 0; m + 2 < r; ++m) {
      if (out.shape()[m] == 1) continue;
      ++meta[0];
      for (int64_t v : {out.shape()[m], stride(*a, m), stride(*b, m), stride(out, m)})
        meta.push_back(static_cast<int32_t>(v));
      batches *= out.shape()[m];
    }
    if (M > kTileM * 65535 || N > kTileN * 65535) unsupported_error("vulkan matmul: M or N above 4194240");
    Push p;
    p.set(1, static_cast<uint32_t>(M));
    p.set(2, static_cast<uint32_t>(N));
    p.set(3, static_cast<uint32_t>(K));
    p.set(4, static_cast<uint32_t>(a->offset()));
    p.set_int(5, stride(*a, r - 2));
    p.set_int(6, stride(*a, r - 1));
    p.set(7, static_cast<uint32_t>(b->offset()));
    p.set_int(8, stride(*b, r - 2));
    p.set_int(9, stride(*b, r - 1));
    p.set(10, static_cast<uint32_t>(out.offset()));
    p.set_int(11, stride(out, r - 2));
    p.set_int(12, stride(out, r - 1));
    p.set(13, 0);
    p.set(14, static_cast<uint32_t>(batches));
    const uint32_t gx = static_cast<uint32_t>((M + kTileM - 1) / kTileM);
    const uint32_t gy = static_cast<uint32_t>((N + kTileN - 1) / kTileN);
    const uint32_t gz = static_cast<uint32_t>(std::min<int64_t>(batches, 65535));
    launch({Kernel::kMatmul, f64, {f64 ? static_cast<uint32_t>(kF64) : fmt}}, out, *a, *b, meta, p, gx, gy, gz);
  }

 private:
  Ref<Tensor> make(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents, bool zero) {
    const int64_t n = checked_product(extents);
    auto c = make_ref<VulkanCarrier>(rt, Ref<Device>(device_), dtype, static_cast<size_t>(n), zero);
    return Tensor::create(c, 0, Layout::dense(extents));
  }

  static vk::Context& context_of(const Tensor& t) { return static_cast<const VulkanCarrier&>(t.carrier()).context(); }
  // With the context's mutex held: STALE_HANDLE for a carrier of an older
  // device generation.
  static VkBuffer buffer_of(const Tensor& t) { return static_cast<const VulkanCarrier&>(t.carrier()).buffer_handle(); }

  void need_float64(const char* what) const {
    vk::Context& ctx = *vulkan_context(*device_);
    if (ctx.has_float64()) return;
    unsupported_error(std::string("vulkan ") + what + ": f64 kernels need the Vulkan feature shaderFloat64, which " +
                      (ctx.handed_in() ? "the handed-in device was not created with (declare it in "
                                         "sw_vulkan_device_desc_t.enabled_features)"
                                       : std::string("the device (") + ctx.device_name() + ") does not have"));
  }

  static void check_carriers(const char* what, std::initializer_list<const Tensor*> ts) {
    for (const Tensor* t : ts) {
      if (t->carrier().kind() != SW_CARRIER_VULKAN)
        internal_error(std::string("vulkan ") + what + " given a tensor on a " + t->carrier().kind_name() + " carrier");
      if (t->numel() > INT32_MAX || static_cast<int64_t>(t->carrier().size()) > INT32_MAX)
        unsupported_error(std::string("vulkan ") + what + ": tensors above 2^31 elements");
    }
  }

  // Checks an f32/f64 op's operands; returns whether it runs in f64. The
  // shaders compute in f32 and f64: the op definitions widen f16 and bf16,
  // and integer and bool operands are UNSUPPORTED here.
  bool arithmetic(const char* what, std::initializer_list<const Tensor*> ts) const {
    check_carriers(what, ts);
    const sw_dtype_t d = (*ts.begin())->dtype();
    for (const Tensor* t : ts) {
      if (t->dtype() != SW_DTYPE_F32 && t->dtype() != SW_DTYPE_F64)
        unsupported_error(std::string("vulkan: ") + what + " of " + dtype_name(t->dtype()) +
                          " tensors is not supported on a Vulkan carrier (its kernels compute in f32 and f64); move "
                          "the tensors to a CPU carrier");
      if (t->dtype() != d) internal_error(std::string("vulkan ") + what + " given operands of two dtypes");
    }
    if (d == SW_DTYPE_F64) need_float64(what);
    return d == SW_DTYPE_F64;
  }

  [[noreturn]] static void not_on_vulkan(const char* what) {
    unsupported_error(std::string(what) + " are not supported on a Vulkan carrier; move the tensors to a CPU "
                      "carrier (sw_move_async) first");
  }

  Ref<Tensor> dense_copy(const Tensor& t) {
    auto d = empty(t.runtime_ref(), t.dtype(), t.shape());
    copy(t, *d);
    return d;
  }

  void zero(const Tensor& out) {
    if (!out.numel()) return;
    vk::Context& ctx = context_of(out);
    const VkDeviceSize es = dtype_size(out.dtype());
    const VkDeviceSize from = out.offset() * es, bytes = out.numel() * es;
    // vkCmdFillBuffer takes whole words, else a copy from a zeroed scratch
    // buffer: allocated (and released) outside the context's mutex, as the
    // device's mutex comes first.
    Ref<Tensor> z = from % 4 == 0 && bytes % 4 == 0 ? Ref<Tensor>() : zeros(out.runtime_ref(), out.dtype(), {out.numel()});
    std::lock_guard lock(ctx.mutex());
    if (!z) return ctx.fill_zero(buffer_of(out), from, bytes);
    ctx.copy(buffer_of(*z), 0, buffer_of(out), from, bytes);
  }

  // Copies `a` into `out`: a buffer copy when nothing converts and both are
  // one dense run, else the copy kernel. `out` may be any injective layout
  // (a tile's place in a compact tensor).
  void copy(const Tensor& a, const Tensor& out) {
    check_carriers("copy", {&a, &out});
    const int64_t n = out.numel();
    if (!n) return;
    vk::Context& ctx = context_of(out);
    std::lock_guard lock(ctx.mutex());
    std::vector<int32_t> meta;
    const Operand da = describe(a, meta);
    const Operand dout = describe(out, meta);
    if (dout.mode == kScalar && n > 1) internal_error("vulkan copy given an output that repeats slots");
    const bool strided_out = dout.mode != kFlat && n > 1;
    const VkDeviceSize es_in = dtype_size(a.dtype()), es_out = dtype_size(out.dtype());
    if (a.dtype() == out.dtype() && da.mode == kFlat && !strided_out) {
      ctx.copy(buffer_of(a), da.offset * es_in, buffer_of(out), out.offset() * es_out, n * es_out);
      return;
    }
    uint32_t fin, fout;
    bool f64 = false;
    if (a.dtype() == out.dtype()) {
      fin = fout = raw_format(a.dtype());
    } else if (value_format(a.dtype(), &fin) && value_format(out.dtype(), &fout)) {
      f64 = fin == kF64 || fout == kF64;
      if (f64) need_float64("copy");
    } else {
      unsupported_error(std::string("vulkan: converting ") + dtype_name(a.dtype()) + " to " +
                        dtype_name(out.dtype()) + " is not supported on a Vulkan carrier");
    }
    uint64_t words = static_cast<uint64_t>(n);
    if (es_out < 8 && !strided_out) {
      const uint64_t per = 4 / es_out, first = static_cast<uint64_t>(out.offset());
      words = (first + n - 1) / per - first / per + 1;
    }
    Push p;
    p.set(1, static_cast<uint32_t>(n));
    p.set(2, da.offset);
    p.set(3, static_cast<uint32_t>(out.offset()));
    p.set(4, da.desc);
    p.set(5, static_cast<uint32_t>(words));
    p.set(6, dout.desc);
    const PipelineKey key{Kernel::kCopy, f64, {fin, fout, da.mode, strided_out ? kGeneral : kFlat}};
    uint32_t gx, gy;
    grid((words + kGroup - 1) / kGroup, &gx, &gy);
    ctx.dispatch(pipelines_->get(key), buffer_of(out), buffer_of(a), buffer_of(a), meta, p, gx, gy, 1);
  }

  void run_1d(const PipelineKey& key, const Tensor& out, const Tensor& a, const Tensor& b,
              const std::vector<int32_t>& meta, const Push& p, int64_t invocations) {
    if (invocations <= 0) return;
    uint32_t gx, gy;
    grid((static_cast<uint64_t>(invocations) + kGroup - 1) / kGroup, &gx, &gy);
    launch(key, out, a, b, meta, p, gx, gy, 1);
  }

  void launch(const PipelineKey& key, const Tensor& out, const Tensor& a, const Tensor& b,
              const std::vector<int32_t>& meta, const Push& p, uint32_t gx, uint32_t gy, uint32_t gz) {
    if (!out.layout().is_dense()) internal_error("vulkan kernel given a non-dense output");
    if (out.numel() == 0) return;
    vk::Context& ctx = context_of(out);
    std::lock_guard lock(ctx.mutex());
    // Buffers of carriers released before the batch ran (temporaries among
    // them) are kept by the batch: nothing else needs to hold the operands.
    ctx.dispatch(pipelines_->get(key), buffer_of(out), buffer_of(a), buffer_of(b), meta, p, gx, gy, gz);
  }

  Device* device_;
  vk::Pipelines* pipelines_;
};

}  // namespace

std::unique_ptr<ComputeBackend> make_vulkan_compute_backend(Device* device, vk::Pipelines* pipelines) {
  return std::make_unique<VulkanComputeBackend>(device, pipelines);
}

}  // namespace sw
