// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum the
// remote carrier stores with every block. SSE4.2's crc32 instruction where
// the CPU has it, else a table-driven loop; both give the same values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sw {

// Extends `crc` (the value over the bytes before `data`; 0 to start) with
// `length` bytes at `data`. crc32c("123456789") == 0xE3069283.
uint32_t crc32c(uint32_t crc, const void* data, size_t length);

// Copies `length` bytes from `src` to `dst` (which must not overlap) and
// returns crc32c(crc, src, length), in one pass over the bytes.
uint32_t crc32c_copy(uint32_t crc, void* dst, const void* src, size_t length);

}  // namespace sw
