// Interleaving copies: S arrays `parts[s]` and one array `packed` holding
// them element by element, packed[i * S + s] <-> parts[s][i]. A projection of
// S experts of an (expert, ...) tensor interleaves its tiles this way (the
// expert mode is fastest), and a batched matmul de-interleaves such an operand
// into separate matrices.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sw {

// Copies elements [lo, hi) of every part: into `packed` when `to_packed`, out
// of it otherwise. `es` is any size: 1, 2, 4 and 8 bytes have typed loops,
// other sizes (a quantized dtype's blocks) copy bytes. Groups of four parts
// of 2- or 4-byte elements move as vector transposes. `stream` asks for non-temporal
// stores, for transfers well beyond the last-level cache that nothing reads
// right away.
void interleave_elements(std::byte* packed, std::byte* const* parts, int64_t S, int64_t lo, int64_t hi, size_t es,
                         bool to_packed, bool stream);

}  // namespace sw
