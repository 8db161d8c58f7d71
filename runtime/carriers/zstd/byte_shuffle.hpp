// The byte-shuffle filter of the zstd carrier: the bytes of each element are
// transposed into planes (all byte 0s, then all byte 1s, ...). The exponent
// bytes of float weights vary little, so their plane compresses far better
// than interleaved elements do.
#pragma once

#include <cstddef>

namespace sw {

// Byte b of element i of `elements` goes to planes[b * plane_stride + i], for
// `count` elements of `element_size` bytes. The buffers must not overlap.
void shuffle_bytes(const std::byte* elements, size_t count, size_t element_size, std::byte* planes,
                   size_t plane_stride);

// The inverse: element i is gathered from planes[b * plane_stride + i].
// `streaming` asks for non-temporal stores where the target supports them:
// for outputs far larger than the caches, which would only be evicted again,
// they save the read-for-ownership of every destination line.
void unshuffle_bytes(const std::byte* planes, size_t plane_stride, size_t count, size_t element_size,
                     std::byte* elements, bool streaming = false);

}  // namespace sw
