// Model-file headers: the .npy header and the safetensors JSON header, parsed
// and written as pure functions over byte buffers (no file access), so that
// they can be fuzzed on their own (strideweave_testing.h).
//
// Errors name the source (the file, or "buffer" for the testing hooks) and
// the field at fault:
//   DATA_CORRUPT  bad content: bad magic, a length past the end, bad syntax,
//                 a missing or duplicate field, negative or overflowing
//                 shapes, offsets that disagree with the shape or pass the
//                 end of the file, overlapping or duplicate tensors, a dtype
//                 the format does not define;
//   UNSUPPORTED   a well-formed file this library cannot represent: a dtype
//                 the format defines but StrideWeave has not (safetensors
//                 I8, F8_E4M3, ...; npy int16, complex, structured, big
//                 endian), an npy format version other than 1.0 and 2.0, a
//                 rank above SW_MAX_RANK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strideweave/strideweave.h"

namespace sw {

// One tensor as a model file stores it.
struct StoredTensor {
  std::string name;            // the safetensors key; empty for npy
  sw_dtype_t dtype = SW_DTYPE_INVALID;
  std::vector<int64_t> shape;  // as the file indexes it (NumPy's shape)
  bool fortran_order = false;  // the first index fastest (npy only)
  uint64_t offset = 0;         // absolute byte offset of element 0 in the file
  uint64_t bytes = 0;          // numel * dtype size
};

// ---- npy --------------------------------------------------------------

// Bytes an npy file's header needs before its length is known: the magic
// (6), the version (2) and a 4-byte length (version 2.0).
constexpr size_t kNpyPrefixBytes = 12;
// Longest npy header accepted (NumPy itself refuses headers above 10000
// bytes unless told otherwise).
constexpr uint64_t kNpyMaxHeaderBytes = uint64_t{1} << 20;

// The total length of the npy header (magic, version, length field and the
// dictionary), from the file's first `size` bytes (at least 10, or 12 for
// version 2.0). DATA_CORRUPT / UNSUPPORTED as parse_npy_header.
uint64_t npy_header_length(const std::byte* data, size_t size, uint64_t file_size, const std::string& source);

// Parses an npy header. `data` holds the first `size` bytes of a file of
// `file_size` bytes (size <= file_size) and must include the whole header;
// the data must fit in the file.
StoredTensor parse_npy_header(const std::byte* data, size_t size, uint64_t file_size, const std::string& source);

// The header of an npy version 1.0 file (2.0 when the dictionary needs more
// than 65535 bytes) holding `shape` of `dtype` in C order, padded so that the
// data starts at a multiple of 64 bytes. UNSUPPORTED for bf16 (NumPy has no
// such dtype).
std::string npy_header(sw_dtype_t dtype, const std::vector<int64_t>& shape, const std::string& target);

// ---- safetensors ------------------------------------------------------

// Largest JSON header accepted, as the reference implementation.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100000000;

struct SafetensorsHeader {
  uint64_t data_start = 0;           // 8 + the JSON header's length
  std::vector<StoredTensor> tensors;  // in the header's order; offsets absolute
  // The tensor called `name`, or nullptr.
  const StoredTensor* find(const std::string& name) const;
};

// The JSON header's length from the file's first 8 bytes; DATA_CORRUPT
// when it passes the end of the file or the limit, or when the byte after it
// (if given) is not '{': then the message says the input "is not a
// safetensors file" (an index.json, an .npy, a text file opened by mistake).
uint64_t safetensors_header_length(const std::byte* data, size_t size, uint64_t file_size, const std::string& source);

// Parses a safetensors header: `data` holds the first `size` bytes of a file
// of `file_size` bytes and must include the 8-byte length and the whole JSON
// header. "__metadata__" is checked to be an object and otherwise ignored.
SafetensorsHeader parse_safetensors_header(const std::byte* data, size_t size, uint64_t file_size,
                                           const std::string& source);

// The safetensors dtype name ("F32", ...) of a dtype.
const char* safetensors_dtype_name(sw_dtype_t dtype);

// The 8-byte length and JSON header of a safetensors file holding `tensors`
// (name, dtype, shape; data laid out one after another in that order, each
// `bytes` long) and string `metadata`, padded with spaces so that the data
// starts at a multiple of 8 bytes. Fills each tensor's offset (absolute).
std::string safetensors_header(std::vector<StoredTensor>& tensors,
                               const std::vector<std::pair<std::string, std::string>>& metadata);

// ---- geometry ---------------------------------------------------------

// The TiledEvictable geometry that gives each tile one contiguous block of
// the file: the file's slowest index cut into tiles of one index each (one
// expert of an (E, O, I) row-major tensor), a rank-1 tensor one tile. For a
// C-order file of shape (s0, ..., s_{r-1}) the logical (first-mode-fastest)
// shape is (s_{r-1}, ..., s0) and `permutation` is (r-1, ..., 0): permuting
// the full tensor by it indexes as the file does. A Fortran-order file maps
// with no permutation, its last index cut into tiles.
struct FileTensorGeometry {
  std::vector<int64_t> logical, grid, tile;
  std::vector<size_t> permutation;
};
FileTensorGeometry file_tensor_geometry(const std::vector<int64_t>& shape, bool row_major);

}  // namespace sw
