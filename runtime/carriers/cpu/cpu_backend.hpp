// The CPU carrier's kernels: elementwise, copy/convert, reduce_sum and
// matmul over the strided iteration engine, on the runtime's compute pool.
#pragma once

#include "ops/backend.hpp"

namespace sw {

ComputeBackend& cpu_backend();

}  // namespace sw
