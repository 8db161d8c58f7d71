// Model-file headers: the .npy header, the safetensors JSON header and the
// GGUF header, parsed and written as pure functions over byte buffers (no
// file access), so that they can be fuzzed on their own
// (strideweave_testing.h).
//
// Errors name the source (the file, or "buffer" for the testing hooks) and
// the field at fault:
//   DATA_CORRUPT  bad content: bad magic, a length past the end, bad syntax,
//                 a missing or duplicate field, negative or overflowing
//                 shapes, offsets that disagree with the shape or pass the
//                 end of the file, overlapping or duplicate tensors, a dtype
//                 the format does not define (GGUF: an unknown ggml type or
//                 value type, a misaligned offset, a first dimension its
//                 type's block does not divide, a count or string length
//                 the file cannot hold);
//   UNSUPPORTED   a well-formed file this library cannot represent: a dtype
//                 the format defines but StrideWeave has not (safetensors
//                 I8, F8_E4M3, ...; npy int16, complex, structured, big
//                 endian), an npy format version other than 1.0 and 2.0, a
//                 rank above SW_MAX_RANK, GGUF versions other than 2 and 3
//                 and big-endian GGUF files.
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

// ---- GGUF -------------------------------------------------------------

// llama.cpp's file format: "GGUF", a version, typed metadata key/values,
// tensor infos (name, dimensions ne[0..n) with ne[0] fastest, ggml type,
// offset into the data section) and the data section, which starts at the
// first multiple of `general.alignment` (default 32) after the infos.

constexpr uint32_t kGgufDefaultAlignment = 32;
// Dimensions a GGUF tensor has at most (ggml's GGML_MAX_DIMS).
constexpr size_t kGgufMaxDims = 4;
// Deepest nesting of metadata arrays accepted (GGUF allows arrays of arrays).
constexpr int kGgufMaxArrayDepth = 8;
// Bytes of header an opener reads at most: metadata (a tokenizer's vocabulary
// is a few MiB) and tensor infos.
constexpr uint64_t kGgufMaxHeaderBytes = uint64_t{1} << 30;

// GGUF's metadata value types.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
// The value type's name ("UINT32", ...), or nullptr for an unknown one.
const char* gguf_value_type_name(uint32_t type);
// Bytes of one value of a fixed-size type; 0 for STRING, ARRAY and unknown.
size_t gguf_value_size(uint32_t type);

// One ggml tensor type: `block` elements (along ne[0]) stored in `bytes`.
struct GgufType {
  uint32_t id;
  const char* name;
  uint32_t block;
  uint32_t bytes;
  // StrideWeave's dtype of the same layout, SW_DTYPE_INVALID when it has none.
  sw_dtype_t dtype;
};
// The ggml type of id `id`, or nullptr when the format defines none.
const GgufType* gguf_type(uint32_t id);
// The ggml type holding `dtype`'s elements as they are, or nullptr.
const GgufType* gguf_type_of(sw_dtype_t dtype);

struct GgufValue {
  uint32_t type = 0;  // GgufValueType
  uint64_t bits = 0;  // a scalar's little-endian bits
  std::string text;   // STRING
  // ARRAY: the element type and count; fixed-size elements are kept as their
  // bytes in `raw`, strings in `strings`, arrays in `items`.
  uint32_t element_type = 0;
  uint64_t count = 0;
  std::string raw;
  std::vector<std::string> strings;
  std::vector<GgufValue> items;
};

struct GgufTensor {
  std::string name;
  const GgufType* type = nullptr;
  std::vector<int64_t> ne;  // ggml's dimensions, ne[0] fastest
  uint64_t offset = 0;      // absolute byte offset in the file
  uint64_t bytes = 0;
  // NumPy's shape of the data: ne reversed (row-major, the last index fastest).
  std::vector<int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

struct GgufHeader {
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  uint64_t data_start = 0;                                  // the data section's absolute offset
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in the file's order
  std::vector<GgufTensor> tensors;                          // in the file's order
  // The tensor called `name`, or nullptr.
  const GgufTensor* find(const std::string& name) const;
};

// Parses a GGUF header (versions 2 and 3): `data` holds the first `size`
// bytes of a file of `file_size` bytes. When the header runs past the buffer
// but not past the file, DATA_CORRUPT ("truncated") unless `more` is given:
// then *more is set to a byte count the buffer must reach (a lower bound; read
// that much and parse again) and an empty header is returned. *more is 0
// after a complete parse.
GgufHeader parse_gguf_header(const std::byte* data, size_t size, uint64_t file_size, const std::string& source,
                             uint64_t* more = nullptr);

// The dtype of a tensor of a GGUF file, UNSUPPORTED naming the ggml type
// when StrideWeave has none for it (Q4_1, Q5_K, the IQ types, ...).
sw_dtype_t gguf_tensor_dtype(const GgufTensor& t, const std::string& source);

// One tensor to write: its ggml type, dimensions and bytes; the offset is
// filled (absolute) by gguf_header.
struct GgufTensorOut {
  std::string name;
  const GgufType* type = nullptr;
  std::vector<int64_t> ne;
  uint64_t bytes = 0;
  uint64_t offset = 0;
};

// A GGUF version 3 file's header up to its data section: `metadata` key
// values (a "general.alignment" UINT32 is added when `alignment` is not 32),
// the tensor infos of `tensors` laid out one after another in that order,
// each at a multiple of `alignment`, and the padding up to the data. Fills
// each tensor's offset (absolute).
std::string gguf_header(std::vector<GgufTensorOut>& tensors,
                        const std::vector<std::pair<std::string, GgufValue>>& metadata, uint32_t alignment);

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
