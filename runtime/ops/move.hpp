#pragma once

#include "async/await.hpp"
#include "core/tensor.hpp"

namespace sw::ops {

// Validates, claims both carriers and submits the move; see sw_move_async.
Ref<Await> move_async(const Ref<Tensor>& tensor, const Ref<Carrier>& destination);

}  // namespace sw::ops
