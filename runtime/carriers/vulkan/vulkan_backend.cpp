// Vulkan kernels: the ComputeBackend of one Vulkan device. Operands arrive
// broadcast to the output's shape (as for the CPU backend); strided operands
// are indexed in the shaders, reduce_sum and matmul first make theirs dense.
// Dispatches are recorded into the device's batch and submitted when values
// are read back.
#include <string>

#include "base/error.hpp"
#include "carriers/vulkan/vulkan_carrier.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"

namespace sw {
namespace {

constexpr int kMaxLeaves = 16;

class VulkanComputeBackend final : public ComputeBackend {
 public:
  explicit VulkanComputeBackend(Device* device) : device_(device) {}
  const char* name() const override { return "vulkan"; }

  Ref<Tensor> empty(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) override {
    const int64_t n = checked_product(extents);
    auto c = make_ref<VulkanCarrier>(rt, Ref<Device>(device_), dtype, static_cast<size_t>(n));
    return Tensor::create(c, 0, Layout::dense(extents));
  }
  Ref<Tensor> zeros(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) override {
    return empty(rt, dtype, extents);  // Vulkan carriers are zero-filled
  }

  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    check_f32("binary op", {&a, &b, &out});
    std::vector<int32_t> meta;
    vk::Push p;
    p.meta_a = describe(a, meta);
    p.meta_b = describe(b, meta);
    p.op = op == BinaryOp::kAdd ? 0 : op == BinaryOp::kMul ? 1 : 2;
    run(vk::Kernel::kBinary, out, a, b, meta, p);
  }

  void unary(UnaryOp op, const Tensor& a, double scalar, const Tensor& out) override {
    check_f32("unary op", {&a, &out});
    std::vector<int32_t> meta;
    vk::Push p;
    p.meta_a = describe(a, meta);
    p.op = op == UnaryOp::kRelu ? 0 : op == UnaryOp::kScale ? 1 : 2;
    p.scalar = static_cast<float>(scalar);
    run(vk::Kernel::kUnary, out, a, a, meta, p);
  }

  void reduce_sum(const Tensor& a_in, const Tensor& out) override {
    check_f32("reduce_sum", {&a_in, &out});
    Ref<Tensor> a = dense(a_in);
    if (a->rank() > kMaxLeaves) unsupported_error("vulkan reduce_sum: rank above 16");
    std::vector<int32_t> meta(1 + 2 * kMaxLeaves, 0);
    meta[0] = static_cast<int32_t>(a->rank());
    int64_t reduced = 1;
    for (size_t m = 0; m < a->rank(); ++m) {
      meta[1 + m] = static_cast<int32_t>(a->shape()[m]);
      const bool r = out.shape()[m] == 1 && a->shape()[m] != 1;
      meta[17 + m] = r;
      if (r) reduced *= a->shape()[m];
    }
    vk::Push p;
    p.p0 = static_cast<uint32_t>(reduced);
    run(vk::Kernel::kReduceSum, out, *a, *a, meta, p);
  }

  void matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out) override {
    check_f32("matmul", {&a_in, &b_in, &out});
    Ref<Tensor> a = dense(a_in), b = dense(b_in);
    const size_t r = a->rank();
    const int64_t M = a->shape()[r - 2], K = a->shape()[r - 1];
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < r; ++i) batch *= a->shape()[i];
    vk::Push p;
    p.p0 = static_cast<uint32_t>(M);
    p.p1 = static_cast<uint32_t>(K);
    std::vector<int32_t> meta{static_cast<int32_t>(batch)};  // read at meta[meta_b]
    run(vk::Kernel::kMatmul, out, *a, *b, meta, p);
  }

 private:
  static void check_f32(const char* what, std::initializer_list<const Tensor*> ts) {
    for (const Tensor* t : ts) {
      if (t->dtype() != SW_DTYPE_F32)
        unsupported_error(std::string("vulkan ") + what + ": the Vulkan kernels compute f32, not " +
                          dtype_name(t->dtype()));
      if (t->carrier().kind() != SW_CARRIER_VULKAN)
        internal_error(std::string("vulkan ") + what + " given a tensor on a " + t->carrier().kind_name() + " carrier");
      if (t->numel() > INT32_MAX || static_cast<int64_t>(t->carrier().size()) > INT32_MAX)
        unsupported_error(std::string("vulkan ") + what + ": tensors above 2^31 elements");
    }
  }

  // Appends [offset, leaves, extents x16, strides x16]; returns its base.
  static uint32_t describe(const Tensor& t, std::vector<int32_t>& meta) {
    const uint32_t base = static_cast<uint32_t>(meta.size());
    meta.resize(base + 2 + 2 * kMaxLeaves, 0);
    meta[base] = static_cast<int32_t>(t.offset());
    int n = 0;
    for (const Leaf& l : t.layout().leaves()) {
      if (l.extent == 1) continue;
      if (n == kMaxLeaves) unsupported_error("vulkan: a layout with more than 16 non-trivial leaves");
      meta[base + 2 + n] = static_cast<int32_t>(l.extent);
      meta[base + 18 + n] = static_cast<int32_t>(l.stride);
      ++n;
    }
    meta[base + 1] = n;
    return base;
  }

  Ref<Tensor> dense(const Tensor& t) {
    if (t.layout().is_dense() && t.offset() == 0) return Ref<Tensor>(const_cast<Tensor*>(&t));
    auto d = empty(t.runtime_ref(), t.dtype(), t.shape());
    unary(UnaryOp::kCopy, t, 0.0, *d);
    return d;
  }

  void run(vk::Kernel k, const Tensor& out, const Tensor& a, const Tensor& b, const std::vector<int32_t>& meta,
           vk::Push p) {
    if (!out.layout().is_dense()) internal_error("vulkan kernel given a non-dense output");
    p.n = static_cast<uint32_t>(out.numel());
    p.out_offset = static_cast<uint32_t>(out.offset());
    if (p.n == 0) return;
    vk::Context& ctx = static_cast<const VulkanCarrier&>(out.carrier()).context();
    std::lock_guard lock(ctx.mutex());
    auto buf = [](const Tensor& t) { return static_cast<const VulkanCarrier&>(t.carrier()).buffer(); };
    ctx.dispatch(k, buf(out), buf(a), buf(b), meta, p);
    // Temporaries (dense copies) live until the batch ran.
    ctx.keep_until_flushed(Ref<Object>(const_cast<Tensor*>(&a)));
    ctx.keep_until_flushed(Ref<Object>(const_cast<Tensor*>(&b)));
  }

  Device* device_;
};

}  // namespace

std::unique_ptr<ComputeBackend> make_vulkan_compute_backend(Device* device) {
  return std::make_unique<VulkanComputeBackend>(device);
}

}  // namespace sw
