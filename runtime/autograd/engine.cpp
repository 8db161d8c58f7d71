// Reverse mode: discover the reachable graph, check every saved version,
// then run nodes in dependency order with their contributions summed.
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.hpp"
#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw {

namespace {
thread_local StepScope* tls_step_scope = nullptr;
}  // namespace

StepScope::StepScope() : previous_(tls_step_scope) { tls_step_scope = this; }
StepScope::~StepScope() { tls_step_scope = previous_; }
StepScope* current_step_scope() { return tls_step_scope; }

std::shared_ptr<StepParticipant>& StepScope::slot(const void* key) {
  for (auto& [k, p] : participants_)
    if (k == key) return p;
  participants_.emplace_back(key, nullptr);
  return participants_.back().second;
}

void StepScope::commit() {
  for (auto& [k, p] : participants_)
    if (p) p->commit();
}

void StepScope::abort(const Status& st) noexcept {
  for (auto& [k, p] : participants_)
    if (p) p->abort(st);
}

void run_backward(const Ref<Tensor>& root, const Ref<Tensor>& cotangent_in, bool retain_graph,
                  const GradientMath& math) {
  auto sum_into = [&](const Ref<Tensor>& acc, const Ref<Tensor>& g) { return acc ? math.sum(acc, g) : g; };
  auto accumulate_leaf = [&](const Ref<Tensor>& leaf, const Ref<Tensor>& g) {
    Ref<Tensor> existing = leaf->grad();
    Ref<Tensor> next = math.leaf_gradient(*leaf, g);
    if (existing) next = math.sum(existing, next);
    leaf->set_grad(next);
  };
  if (!root->requires_grad())
    state_error("backward: the tensor does not require grad and has no grad_fn");
  Ref<Tensor> cot = cotangent_in;
  if (!cot) {
    if (root->numel() != 1)
      value_error("backward: a cotangent is required for a tensor of " + std::to_string(root->numel()) +
                  " elements; it may be omitted only for a one-element tensor");
    cot = math.one_like(root);
  } else {
    if (cot->dtype() != root->dtype())
      type_error(std::string("backward: cotangent dtype ") + dtype_name(cot->dtype()) + " differs from the tensor's " +
                 dtype_name(root->dtype()));
    if (cot->shape() != root->shape()) value_error("backward: cotangent shape differs from the tensor's shape");
    if (&cot->runtime() != &root->runtime())
      value_error("backward: the cotangent belongs to a different runtime than the tensor");
    cot->carrier().check_live("backward (cotangent)");
  }
  NoGradGuard no_grad;
  if (!root->grad_fn()) {
    accumulate_leaf(root, cot);
    return;
  }

  // Discover reachable nodes and count incoming edges.
  std::vector<Node*> nodes;
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack{node_of(*root)};
  seen.insert(stack.back());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    nodes.push_back(n);
    for (const Edge& e : n->edges()) {
      if (!e.node) continue;
      ++deps[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  // Validate everything before any node runs, and keep the saved values'
  // storage from being dropped underneath the nodes that read them.
  for (Node* n : nodes) n->check_saved();
  std::vector<StoragePin> saved_pins;
  for (Node* n : nodes)
    for (const auto& s : n->saved())
      if (s.tensor && !s.tensor->carrier().is_composite()) saved_pins.emplace_back(s.tensor->carrier(), "backward");

  // The nodes and the leaves' gradients, as one step with the work they
  // start (StepParticipant): it commits only if all of it succeeded.
  run_as_step([&] {
    std::unordered_map<Node*, Ref<Tensor>> pending;
    std::vector<std::pair<Ref<Tensor>, Ref<Tensor>>> leaves;  // (leaf, summed grad), first-seen order
    std::unordered_map<Tensor*, size_t> leaf_index;
    pending[node_of(*root)] = cot;
    std::deque<Node*> ready{node_of(*root)};
    while (!ready.empty()) {
      Node* n = ready.front();
      ready.pop_front();
      Ref<Tensor> g;
      if (auto it = pending.find(n); it != pending.end()) {
        g = it->second;
        pending.erase(it);
      }
      std::vector<Ref<Tensor>> grads;
      if (g) grads = n->apply(g);
      for (size_t i = 0; i < n->edges().size(); ++i) {
        const Edge& e = n->edges()[i];
        const Ref<Tensor> gi = i < grads.size() ? grads[i] : Ref<Tensor>();
        if (e.node) {
          if (gi) pending[e.node.get()] = sum_into(pending[e.node.get()], gi);
          if (--deps[e.node.get()] == 0) ready.push_back(e.node.get());
        } else if (e.leaf && gi) {
          auto [it, inserted] = leaf_index.emplace(e.leaf.get(), leaves.size());
          if (inserted)
            leaves.emplace_back(e.leaf, gi);
          else
            leaves[it->second].second = sum_into(leaves[it->second].second, gi);
        }
      }
    }
    for (auto& [leaf, g] : leaves) accumulate_leaf(leaf, g);
  });
  if (!retain_graph)
    for (Node* n : nodes) n->free_saved();
}

}  // namespace sw
