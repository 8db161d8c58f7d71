#include "autograd/node.hpp"

namespace sw {

// Grad mode is a property of the calling thread, as in PyTorch: a no-grad
// scope covers everything that thread does, whatever runtime it touches.
static thread_local bool tls_grad_enabled = true;

bool grad_enabled() { return tls_grad_enabled; }

bool set_grad_enabled(bool enabled) {
  const bool previous = tls_grad_enabled;
  tls_grad_enabled = enabled;
  return previous;
}

}  // namespace sw
