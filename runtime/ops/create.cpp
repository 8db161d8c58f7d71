// Constructors: full, arange and counter-based random tensors.
#include <cmath>
#include <cstring>
#include <limits>

#include "base/mix.hpp"
#include "base/thread_pool.hpp"
#include "ops/op_util.hpp"

namespace sw::ops {
namespace {

// A floating value in `dtype`: integers truncated toward zero and
// saturating, as conversions between tensors do.
void store_value(sw_dtype_t dtype, double v, std::byte* p) {
  switch (dtype) {
    case SW_DTYPE_I32: {
      const int32_t x = v != v ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case SW_DTYPE_I64: {
      const int64_t x = v != v ? 0 : v <= -9223372036854775808.0 ? INT64_MIN
                                : v >= 9223372036854775808.0 ? INT64_MAX : static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      return;
    }
    case SW_DTYPE_U8: {
      const uint8_t x = v != v ? 0 : v <= 0 ? 0 : v >= 255 ? 255 : static_cast<uint8_t>(v);
      *reinterpret_cast<uint8_t*>(p) = x;
      return;
    }
    case SW_DTYPE_BOOL: *reinterpret_cast<uint8_t*>(p) = v != 0; return;
    default: double_to_element(dtype, v, p);
  }
}

// Fills a fresh tensor of `backend` with value(i) for element i (first
// mode fastest), in parallel, straight into host memory where it has some.
template <typename F>
Ref<Tensor> generate(ComputeBackend& backend, const Ref<Runtime>& rt, sw_dtype_t dtype,
                     const std::vector<int64_t>& extents, F value) {
  auto out = backend.empty(rt, dtype, extents);
  const int64_t n = out->numel();
  if (!n) return out;
  const size_t es = dtype_size(dtype);
  std::byte* host = out->host_base();
  std::vector<std::byte> staging;
  if (!host) {
    staging.resize(static_cast<size_t>(n) * es);
    host = staging.data();
  }
  rt->compute().parallel_for(n, 1 << 14, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) store_value(dtype, value(i), host + i * static_cast<int64_t>(es));
  });
  if (!staging.empty()) out->carrier().write_slots(0, static_cast<size_t>(n), staging.data());
  return out;
}

// The k-th uniform double of `seed` in [0, 1) (53 bits).
double uniform01(uint64_t seed, uint64_t k) {
  return static_cast<double>(splitmix64(splitmix64(seed) ^ k) >> 11) * 0x1p-53;
}

void check_extents(const std::vector<int64_t>& extents, const char* op) {
  if (extents.size() > SW_MAX_RANK)
    value_error(std::string(op) + ": rank " + std::to_string(extents.size()) + " exceeds the maximum of " +
                std::to_string(SW_MAX_RANK));
  checked_product(extents);
}

}  // namespace

Ref<Tensor> full(ComputeBackend& backend, const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents,
                 double value) {
  check_dtype(dtype, "full");
  refuse_quantized(dtype, "full");
  check_extents(extents, "full");
  std::byte bytes[8];
  double_to_element(dtype, value, bytes);  // VALUE when it does not fit
  auto out = backend.empty(rt, dtype, extents);
  if (out->numel()) {
    auto one = backend.empty(rt, dtype, {});
    one->carrier().write_slots(0, 1, bytes);
    backend.unary(UnaryOp::kCopy, *broadcast_view(*one, extents), 0.0, *out);
  }
  return out;
}

Ref<Tensor> arange(ComputeBackend& backend, const Ref<Runtime>& rt, sw_dtype_t dtype, double start, double stop,
                   double step) {
  check_dtype(dtype, "arange");
  refuse_quantized(dtype, "arange");
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    value_error("arange: start, stop and step must be finite");
  if (step == 0) value_error("arange: step must not be 0");
  const double count = std::ceil((stop - start) / step);
  if (count > static_cast<double>(int64_t{1} << 48))
    value_error("arange: " + std::to_string(count) + " elements are too many");
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  return generate(backend, rt, dtype, {n}, [=](int64_t i) { return start + static_cast<double>(i) * step; });
}

Ref<Tensor> random(ComputeBackend& backend, const Ref<Runtime>& rt, sw_dtype_t dtype,
                   const std::vector<int64_t>& extents, Distribution dist, double p0, double p1, uint64_t seed) {
  check_dtype(dtype, "random");
  if (!dtype_is_float(dtype))
    type_error(std::string("random: values are drawn in floating dtypes, not ") + dtype_name(dtype) +
               "; convert them afterwards");
  check_extents(extents, "random");
  if (!std::isfinite(p0) || !std::isfinite(p1)) value_error("random: the distribution's parameters must be finite");
  if (dist == Distribution::kUniform) {
    if (!(p0 <= p1)) value_error("random: uniform needs low <= high");
    // Rounded to a narrower dtype, a value just below `high` may round up to
    // it: such values are drawn again from the next counter.
    return generate(backend, rt, dtype, extents, [=](int64_t i) {
      for (uint64_t attempt = 0; attempt < 64; ++attempt) {
        const double v = p0 + (p1 - p0) * uniform01(seed + attempt * 0x9e3779b97f4a7c15ull, static_cast<uint64_t>(i));
        std::byte b[8];
        double_to_element(dtype, v, b);
        if (element_to_double(dtype, b) < p1 || p0 == p1) return v;
      }
      return p0;
    });
  }
  if (p1 < 0) value_error("random: normal needs stddev >= 0");
  // Box-Muller over pairs of counters: element 2j and 2j + 1 share a pair.
  return generate(backend, rt, dtype, extents, [=](int64_t i) {
    const uint64_t j = static_cast<uint64_t>(i) / 2;
    const double u1 = 1.0 - uniform01(seed, 2 * j), u2 = uniform01(seed, 2 * j + 1);  // u1 in (0, 1]
    const double r = std::sqrt(-2.0 * std::log(u1)), theta = 6.283185307179586 * u2;
    return p0 + p1 * r * ((i & 1) ? std::sin(theta) : std::cos(theta));
  });
}

}  // namespace sw::ops
