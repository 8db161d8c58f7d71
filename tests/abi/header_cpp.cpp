// Compiled as C++17 and as C++20 with -Wall -Wextra -Werror -pedantic: the
// public headers are valid C++ of both.
#include "strideweave/strideweave.h"
#include "strideweave/strideweave_testing.h"

#include <cstdio>
#include <type_traits>

static_assert(std::is_same_v<decltype(&sw_version), uint32_t (*)()>);
static_assert(sizeof(sw_error_code_t) == 4, "enums are 32-bit");
static_assert(sizeof(sw_fault_kind_t) == 4, "enums are 32-bit");

int main() {
  sw_runtime_t* rt = nullptr;
  sw_error_t* e = sw_runtime_create(nullptr, &rt);
  if (e) return 1;
  sw_runtime_release(rt);
  std::printf("C++ header ok (%ld): %s\n", static_cast<long>(__cplusplus), sw_version_string());
  return 0;
}
