// reduce_sum and its VJP.
#include <algorithm>

#include "autograd/node.hpp"
#include "base/error.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw::ops {
namespace {

class ReduceSumNode final : public Node {
 public:
  ReduceSumNode(std::vector<int64_t> input, std::vector<int64_t> kept) : input_(std::move(input)), kept_(std::move(kept)) {}
  const char* name() const override { return "reduce_sum"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    auto g_kept = reshape_dense(g, kept_);
    return {copy_as(*broadcast_view(*g_kept, input_), g->dtype())};
  }

 private:
  std::vector<int64_t> input_, kept_;
};

}  // namespace

Ref<Tensor> reduce_sum(const Ref<Tensor>& a, const std::vector<int64_t>* axes, bool keepdims) {
  auto pins = check_operands("reduce_sum", {a.get()});
  if (a->dtype() != SW_DTYPE_F32 && a->dtype() != SW_DTYPE_F64)
    type_error(std::string("reduce_sum supports f32 and f64 tensors, not ") + dtype_name(a->dtype()));
  const int64_t rank = static_cast<int64_t>(a->rank());
  std::vector<bool> reduced(a->rank(), axes == nullptr);
  if (axes) {
    for (int64_t ax : *axes) {
      const int64_t n = ax < 0 ? ax + rank : ax;
      if (n < 0 || n >= rank)
        index_error("reduce_sum: axis " + std::to_string(ax) + " is out of range for rank " + std::to_string(rank));
      if (reduced[n]) value_error("reduce_sum: axis " + std::to_string(ax) + " is repeated");
      reduced[n] = true;
    }
  }
  std::vector<int64_t> kept, result;
  for (size_t i = 0; i < a->rank(); ++i) {
    kept.push_back(reduced[i] ? 1 : a->shape()[i]);
    if (!reduced[i] || keepdims) result.push_back(kept.back());
  }
  auto x = resolve(a, SW_PURPOSE_OPERATION, "reduce_sum");
  ComputeBackend& be = backend_for(x->carrier());
  auto out = be.empty(x->runtime_ref(), x->dtype(), kept);
  if (out->numel()) be.reduce_sum(*x, *out);
  out = reshape_dense(out, result);
  if (should_record({a.get()})) {
    auto node = make_ref<ReduceSumNode>(a->shape(), kept);
    node->connect({a.get()});
    attach(out, node);
  }
  return out;
}

}  // namespace sw::ops
