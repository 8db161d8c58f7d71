// Text for error messages shared by every layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sw {

// A shape as Python prints a tuple: (2, 3), (4,), ().
inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace sw
