// Compiled as C++20 with -pedantic-errors: the public header is valid C++.
#include "strideweave/strideweave.h"

#include <cstdio>
#include <type_traits>

static_assert(std::is_same_v<decltype(&sw_version), uint32_t (*)()>);
static_assert(sizeof(sw_error_code_t) == 4, "enums are 32-bit");

int main() {
  sw_runtime_t* rt = nullptr;
  sw_error_t* e = sw_runtime_create(nullptr, &rt);
  if (e) return 1;
  sw_runtime_release(rt);
  std::printf("C++ header ok: %s\n", sw_version_string());
  return 0;
}
