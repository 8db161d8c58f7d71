#include "ops/backend.hpp"

#include <string>

#include "base/error.hpp"

namespace sw {

ComputeBackend& backend_for(const Carrier& carrier) {
  if (ComputeBackend* b = carrier.compute_backend()) return *b;
  type_error(std::string("operations do not compute on a ") + carrier.kind_name() +
             " carrier; move the tensor to a compute carrier first");
}

}  // namespace sw
