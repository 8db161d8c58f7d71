// A tensor is (carrier, offset, layout) plus its autograd identity.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/object.hpp"
#include "core/carrier.hpp"
#include "core/layout.hpp"

namespace sw {

// The part of an autograd node a tensor knows: the op that produced it, by
// name. The autograd layer's Node derives from it; core holds it opaquely.
class GraphNode : public Object {
 public:
  GraphNode() : Object(ObjectKind::kNode) {}
  virtual const char* name() const = 0;
};

// VALUE unless a view of a block-quantized `dtype` at `offset` keeps whole
// blocks: the first leaf (the first mode's fastest) walks stride 1 over a
// multiple of the block's elements, and the offset and every other stride of
// an extent above 1 are multiples of the block. Nothing for other dtypes.
void check_blocks(sw_dtype_t dtype, int64_t offset, const Layout& layout);

class Tensor : public Object {
 public:
  // Checks that every reachable slot lies inside the carrier (INDEX).
  ~Tensor() override;
  // VALUE when a quantized tensor's view would split a block (check_blocks).
  static Ref<Tensor> create(Ref<Carrier> carrier, int64_t offset, Ref<Layout> layout);
  // The dense first-mode-fastest tensor of `extents` over slot 0 of a fresh
  // carrier (trusted: the carrier holds exactly that many slots).
  static Ref<Tensor> dense_over(Ref<Carrier> carrier, const std::vector<int64_t>& extents);
  // Another view of the same carrier (trusted: bounds are the caller's duty;
  // a quantized tensor's view is still checked to keep whole blocks, VALUE).
  Ref<Tensor> view(int64_t offset, Ref<Layout> layout) const;

  Carrier& carrier() const { return *carrier_; }
  const Ref<Carrier>& carrier_ref() const { return carrier_; }
  Runtime& runtime() const { return carrier_->runtime(); }
  const Ref<Runtime>& runtime_ref() const { return carrier_->runtime_ref(); }
  int64_t offset() const { return offset_; }
  const Layout& layout() const { return *layout_; }
  const Ref<Layout>& layout_ref() const { return layout_; }
  sw_dtype_t dtype() const { return carrier_->dtype(); }
  size_t rank() const { return layout_->rank(); }
  const std::vector<int64_t>& shape() const { return layout_->extents(); }
  int64_t numel() const { return layout_->size(); }
  uint64_t version() const { return carrier_->version(); }

  // Host address of element 0's slot (offset applied); nullptr if not host memory.
  std::byte* host_base() const;
  // The offset and layout counted in storage units of `unit_bytes` bytes: a
  // quantized dtype's blocks (the first leaf's extent and every other stride
  // divided by the block), the elements themselves otherwise. What moves
  // values as bytes (gathers, block copies) walks this view.
  struct Units {
    int64_t offset;
    Ref<Layout> layout;
    size_t unit_bytes;
  };
  Units units() const;
  // The elements' slots in ordinal order, as runs of consecutive slots.
  std::vector<SlotRun> slot_runs() const;

  // Set once a TiledEvictable verified this tensor's tile footprints.
  bool footprints_checked() const { return footprints_checked_.load(std::memory_order_acquire); }
  void mark_footprints_checked() const { footprints_checked_.store(true, std::memory_order_release); }

  // Autograd identity.
  bool requires_grad() const;
  void set_requires_grad(bool value);
  const Ref<GraphNode>& grad_fn() const { return grad_fn_; }
  void set_grad_fn(Ref<GraphNode> node);
  bool is_leaf() const { return !grad_fn_; }
  Ref<Tensor> grad() const;
  void set_grad(Ref<Tensor> g);

 private:
  Tensor(Ref<Carrier> carrier, int64_t offset, Ref<Layout> layout);
  Ref<Carrier> carrier_;
  int64_t offset_;
  Ref<Layout> layout_;
  bool requires_grad_ = false;
  mutable std::atomic<bool> footprints_checked_{false};
  Ref<GraphNode> grad_fn_;
  mutable std::mutex grad_mutex_;
  Ref<Tensor> grad_;
};

}  // namespace sw
