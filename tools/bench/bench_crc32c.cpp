// The library's CRC-32C routine (runtime/base/crc32c.cpp), for bench_remote
// to time the checksum the remote carrier computes per block on its own.
#include <cstddef>
#include <cstdint>

#include "base/crc32c.hpp"

extern "C" uint32_t bench_crc32c(uint32_t crc, const void* data, size_t length) {
  return sw::crc32c(crc, data, length);
}
