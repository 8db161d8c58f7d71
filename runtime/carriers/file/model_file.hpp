// Model files as secondary tiers: a tensor of a .npy, .safetensors, GGUF or
// raw file opened as a read-only File carrier with the TiledEvictable geometry
// that gives each tile one contiguous block of the file, and tensors saved
// to .safetensors and .npy files by their logical indexing.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "carriers/file/file_carrier.hpp"
#include "carriers/file/model_header.hpp"
#include "core/tensor.hpp"

namespace sw {

struct OpenedTensor {
  Ref<FileCarrier> carrier;
  sw_dtype_t dtype = SW_DTYPE_INVALID;
  std::vector<int64_t> shape;  // as the file indexes it; a stack's count first
  bool row_major = true;
  uint64_t data_offset = 0;    // of element 0
  uint64_t data_bytes = 0;     // in all
  size_t segments = 1;
  FileTensorGeometry geometry;
};

// The header of an npy file (IO if unreadable, DATA_CORRUPT / UNSUPPORTED
// as parse_npy_header). Each read of the file is an SW_FAULT_READ operation
// of `runtime`.
StoredTensor read_npy_header(Runtime& runtime, const std::string& path);
SafetensorsHeader read_safetensors_header(Runtime& runtime, const std::string& path);
// The header of a GGUF file, read in growing prefixes until it is whole
// (DATA_CORRUPT when it would pass kGgufMaxHeaderBytes).
GgufHeader read_gguf_header(Runtime& runtime, const std::string& path);

// The tensor of an npy file.
OpenedTensor open_npy(const Ref<Runtime>& runtime, const std::string& path, const FileCarrierOptions& options);
// Tensor `name` of a safetensors file (VALUE naming it when missing).
OpenedTensor open_safetensors(const Ref<Runtime>& runtime, const std::string& path, const std::string& name,
                              const FileCarrierOptions& options);
// Tensors `names` of one safetensors file, of one dtype and shape, as one
// carrier whose segment i is tensor i: shape (count, *their shape).
OpenedTensor open_safetensors_stack(const Ref<Runtime>& runtime, const std::string& path,
                                    const std::vector<std::string>& names, const FileCarrierOptions& options);
// The same over several files: tensor names[i] of file paths[i] (a sharded
// checkpoint). Each file is opened and its header parsed once, however many
// entries name it and by whatever path; the carrier reads each through one
// descriptor (and one O_DIRECT descriptor). data_offset is names[0]'s
// offset in paths[0], data_bytes the bytes of all. VALUE naming the file and
// the tensor for a name a file lacks, a (file, name) pair given twice, or a
// tensor whose dtype or shape differs from names[0]'s; IO or DATA_CORRUPT
// naming the file that cannot be opened or parsed.
OpenedTensor open_safetensors_stack_files(const Ref<Runtime>& runtime, const std::vector<std::string>& paths,
                                          const std::vector<std::string>& names, const FileCarrierOptions& options);
// Tensor `name` of a GGUF file (VALUE naming it when missing; UNSUPPORTED for
// a ggml type StrideWeave has no dtype for). The shape is NumPy's (ggml's ne
// reversed), row-major: the logical shape is ne, so a stacked expert tensor
// of ne (n_embd, n_ff, n_expert) has one expert per tile.
OpenedTensor open_gguf(const Ref<Runtime>& runtime, const std::string& path, const std::string& name,
                       const FileCarrierOptions& options);
// A raw tensor at `offset` of `path`.
OpenedTensor open_raw_tensor(const Ref<Runtime>& runtime, const std::string& path, sw_dtype_t dtype, uint64_t offset,
                             const std::vector<int64_t>& shape, bool row_major, const FileCarrierOptions& options);

// Saves `tensors` (name, tensor) to a safetensors file at `path`, each in
// row-major order of its own indexing (its shape as the file's), read
// chunk by chunk from wherever its values live: a TiledEvictable's tiles are
// read from their tier (dirty primary values included), never promoted. The
// file is written beside `path` under a temporary name and renamed over it
// at the end, so a failure leaves any previous file as it was.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Ref<Tensor>>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata);
void save_npy(const std::string& path, const Ref<Tensor>& tensor);
// Saves `tensors` to a GGUF (version 3) file as save_safetensors does: each
// tensor's shape is NumPy's shape of its data, its ne that shape reversed.
// `metadata` values are scalars or strings; `alignment` a power of two.
void save_gguf(const std::string& path, const std::vector<std::pair<std::string, Ref<Tensor>>>& tensors,
               const std::vector<std::pair<std::string, GgufValue>>& metadata, uint32_t alignment);

}  // namespace sw
