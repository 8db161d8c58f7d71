#include "autograd/node.hpp"

#include "base/error.hpp"

namespace sw {

void Node::connect(const std::vector<const Tensor*>& inputs) {
  edges_.clear();
  for (const Tensor* t : inputs) {
    Edge e;
    if (t && t->requires_grad()) {
      if (t->grad_fn())
        e.node = Ref<Node>(node_of(*t));
      else
        e.leaf = Ref<Tensor>(const_cast<Tensor*>(t));
    }
    edges_.push_back(std::move(e));
  }
}

void Node::check_saved() const {
  if (freed_)
    state_error(std::string("backward through ") + name() +
                " a second time: its saved tensors were freed; pass retain_graph=true to the first backward");
  for (size_t i = 0; i < saved_.size(); ++i) {
    const SavedTensor& s = saved_[i];
    if (s.tensor->version() != s.version)
      state_error(std::string("a tensor saved by ") + name() + " for backward has been modified in-place (version " +
                  std::to_string(s.version) + " at save, now " + std::to_string(s.tensor->version()) + ")");
  }
}

void Node::free_saved() {
  saved_.clear();
  freed_ = true;
}

bool should_record(const std::vector<const Tensor*>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->requires_grad()) return true;
  return false;
}

void attach(const Ref<Tensor>& out, Ref<Node> node) { out->set_grad_fn(std::move(node)); }

}  // namespace sw
