// Float functions the kernels share, written to match the CPU carrier's
// results closely where GLSL's built-ins are loose (tanh of large inputs,
// pow of negative bases) or missing (erf). f32 only: GLSL has no double exp.
#ifndef SW_F64
float inf_f() { return uintBitsToFloat(0x7f800000u); }

float sigmoid_f(float x) { return 1.0 / (1.0 + exp(-x)); }

float tanh_f(float x) {
  float e = exp(-2.0 * abs(x));
  float t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;
}

// Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7.
float erf_f(float x) {
  float a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  float y = 1.0 - p * exp(-a * a);
  return x < 0.0 ? -y : y;
}

// x ** y as C's pow: negative bases with integral exponents keep their sign.
float pow_f(float x, float y) {
  if (y == 0.0) return 1.0;
  if (isnan(x) || isnan(y)) return x + y;
  bool odd = floor(y) == y && abs(mod(y, 2.0)) == 1.0;
  if (x == 0.0) return y > 0.0 ? (odd ? x : 0.0) : (odd && (floatBitsToUint(x) & 0x80000000u) != 0u ? -inf_f() : inf_f());
  if (x < 0.0 && floor(y) != y) return uintBitsToFloat(0x7fc00000u);
  float r = exp2(y * log2(abs(x)));
  return x < 0.0 && odd ? -r : r;
}
#endif
