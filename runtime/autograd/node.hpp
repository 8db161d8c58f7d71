// Autograd graph nodes. A node is created by a differentiable op when grad
// mode is on and an input requires grad; it holds one edge per input and the
// tensors its VJP needs, each with the carrier version seen at save time.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/object.hpp"
#include "base/status.hpp"
#include "core/tensor.hpp"

namespace sw {

class Node;

// Where a gradient flows: into another node, into a leaf's .grad, or nowhere.
struct Edge {
  Ref<Node> node;
  Ref<Tensor> leaf;
  bool empty() const { return !node && !leaf; }
};

struct SavedTensor {
  Ref<Tensor> tensor;
  uint64_t version = 0;
};

class Node : public GraphNode {
 public:

  // Per-input gradients (null where an input needs none), given the summed
  // cotangent of this node's output. Runs with grad mode off.
  virtual std::vector<Ref<Tensor>> apply(const Ref<Tensor>& grad) = 0;
  // Whether the node's output is a view of its input (same carrier): such a
  // tensor cannot take an in-place op that records, since its base's
  // history would not see it.
  virtual bool is_view() const { return false; }

  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<SavedTensor>& saved() const { return saved_; }

  // Records an edge for each input and returns whether any requires grad.
  void connect(const std::vector<const Tensor*>& inputs);
  void save(const Ref<Tensor>& t) { saved_.push_back({t, t->version()}); }
  const Ref<Tensor>& saved_tensor(size_t i) const { return saved_[i].tensor; }

  // STATE "modified in-place" if a saved tensor's carrier moved on, or STATE
  // if the saved tensors were freed by an earlier backward.
  void check_saved() const;
  void free_saved();

 protected:
  std::vector<Edge> edges_;
  std::vector<SavedTensor> saved_;
  bool freed_ = false;
};

// The node that produced `t` (every GraphNode is a Node), or null for a leaf.
inline Node* node_of(const Tensor& t) { return static_cast<Node*>(t.grad_fn().get()); }

// Whether an op over `inputs` should record a node now.
bool should_record(const std::vector<const Tensor*>& inputs);

// Attaches `node` (already holding edges and saved tensors) to `out`.
void attach(const Ref<Tensor>& out, Ref<Node> node);

// The tensor arithmetic a backward pass needs. The ops layer, which sits
// above autograd, provides it (ops::gradient_math()).
class GradientMath {
 public:
  virtual ~GradientMath() = default;
  // a + b, summing contributions to one node or leaf.
  virtual Ref<Tensor> sum(const Ref<Tensor>& a, const Ref<Tensor>& b) const = 0;
  // `g` as leaf.grad stores it.
  virtual Ref<Tensor> leaf_gradient(const Tensor& leaf, const Ref<Tensor>& g) const = 0;
  // The cotangent 1 of a one-element root, on the carrier kind it computes on.
  virtual Ref<Tensor> one_like(const Ref<Tensor>& root) const = 0;
};

// Runs reverse mode (see sw_backward).
// Work a step of several blocking requests starts (a backward pass), and
// that commits with it: the re-reads of offloaded operands (layers above
// autograd) commit their residency and policy changes only once the whole
// step succeeded, and fail with it otherwise, so that a failed step changes
// nothing. Each returns once nothing of that work moves any more.
class StepParticipant {
 public:
  virtual ~StepParticipant() = default;
  virtual void commit() = 0;
  virtual void abort(const Status& st) noexcept = 0;
};

// The participants of the step running on this thread, keyed by whoever
// added them (a layer finds its own again); null outside one.
class StepScope {
 public:
  StepScope();
  ~StepScope();
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
  std::shared_ptr<StepParticipant>& slot(const void* key);
  void commit();
  void abort(const Status& st) noexcept;

 private:
  StepScope* previous_;
  std::vector<std::pair<const void*, std::shared_ptr<StepParticipant>>> participants_;
};
StepScope* current_step_scope();

// Runs `body` as one step: what it starts commits once it returned, or
// fails with the exception it throws (rethrown).
template <typename F>
void run_as_step(F&& body) {
  StepScope step;
  try {
    body();
  } catch (...) {
    step.abort(capture([] { throw; }));
    throw;
  }
  step.commit();
}

void run_backward(const Ref<Tensor>& root, const Ref<Tensor>& cotangent, bool retain_graph, const GradientMath& math);

// The per-thread grad mode.
bool grad_enabled();
bool set_grad_enabled(bool enabled);

class NoGradGuard {
 public:
  NoGradGuard() : previous_(set_grad_enabled(false)) {}
  ~NoGradGuard() { set_grad_enabled(previous_); }

 private:
  bool previous_;
};

}  // namespace sw
