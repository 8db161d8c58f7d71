#include <algorithm>
#include <cstddef>
#include <cstring>
#include <future>

#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "async/loop.hpp"
#include "carriers/file/file_carrier.hpp"
#include "carriers/file/model_file.hpp"
#include "carriers/file/model_header.hpp"
#include "core/dtype.hpp"
#include "strideweave/strideweave_testing.h"

using namespace sw;
using namespace sw::api;

namespace {

// Requests in flight per transfer beyond this only queue in libuv's pool.
constexpr uint32_t kMaxRequestsInFlight = 64;

// The options of a (possibly older, shorter) desc; NULL gives the defaults.
FileCarrierOptions file_options(const sw_file_carrier_desc_t* desc, const char* what) {
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  if (desc) d = struct_in(desc, d, (std::string(what) + ": desc").c_str());
  if (d.directory && !*d.directory) value_error(std::string(what) + ": desc->directory is empty; pass NULL for the default");
  if (d.requests_in_flight > kMaxRequestsInFlight)
    value_error(std::string(what) + ": desc->requests_in_flight " + std::to_string(d.requests_in_flight) +
                " exceeds " + std::to_string(kMaxRequestsInFlight));
  FileCarrierOptions o;
  if (d.directory) o.directory = d.directory;
  o.direct_io = d.direct_io;
  if (d.chunk_bytes) o.chunk_bytes = d.chunk_bytes;
  if (d.requests_in_flight) o.requests_in_flight = d.requests_in_flight;
  return o;
}

// `c` as the File carrier it is; TYPE naming `what` for another kind.
const FileCarrier* as_file_carrier(const Carrier* c, const char* what) {
  if (c->kind() != SW_CARRIER_FILE)
    type_error(std::string(what) + ": the " + c->kind_name() + " carrier is not a File carrier");
  return static_cast<const FileCarrier*>(c);
}

// Fills the caller's info from an opened (or parsed) tensor.
void info_out(sw_file_tensor_info_t* out, sw_dtype_t dtype, const std::vector<int64_t>& shape, bool row_major,
              uint64_t data_offset, uint64_t data_bytes, size_t segments, const char* what) {
  if (!out) return;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  info.dtype = dtype;
  info.rank = shape.size();
  info.order = row_major ? SW_FILE_ORDER_ROW_MAJOR : SW_FILE_ORDER_FIRST_MODE_FASTEST;
  info.data_offset = data_offset;
  info.data_bytes = data_bytes;
  info.segments = segments;
  const FileTensorGeometry g = file_tensor_geometry(shape, row_major);
  for (size_t i = 0; i < shape.size() && i < SW_MAX_RANK; ++i) {
    info.shape[i] = shape[i];
    info.logical_shape[i] = g.logical[i];
    info.grid_shape[i] = g.grid[i];
    info.tile_shape[i] = g.tile[i];
    info.permutation[i] = g.permutation[i];
  }
  struct_out(out, info, what);
}

// Checks a caller's info struct before any work, so a bad one fails first.
void check_info(const sw_file_tensor_info_t* out, const char* what) {
  if (out) (void)checked_struct_size<sw_file_tensor_info_t>(out->struct_size, what);
}

void opened_out(const Ref<Runtime>& rt, OpenedTensor o, sw_file_tensor_info_t* out_info, sw_carrier_t** out_carrier,
                const char* what) {
  (void)rt;
  info_out(out_info, o.dtype, o.shape, o.row_major, o.data_offset, o.data_bytes, o.segments, what);
  *out_carrier = to_handle<sw_carrier_t>(std::move(o.carrier));
}

// The openers of tensor `name` of one file (safetensors, GGUF): `what` is
// the public function's name, for its messages.
template <typename Open>
sw_error_t* open_named(sw_runtime_t* runtime, const char* path, const char* name, const sw_file_carrier_desc_t* desc,
                       sw_file_tensor_info_t* out_info, sw_carrier_t** out_carrier, const std::string& what,
                       Open open) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    require(path, "path");
    require(name, "name");
    require(out_carrier, "out_carrier");
    const std::string info_what = what + ": out_info";
    check_info(out_info, info_what.c_str());
    const FileCarrierOptions options = file_options(desc, what.c_str());
    opened_out(rt, open(rt, path, name, options), out_info, out_carrier, info_what.c_str());
  });
}

std::vector<std::string> strings_arg(const char* const* strings, size_t count, const char* arg) {
  if (count && !strings) value_error(std::string(arg) + " must not be NULL when its count is " + std::to_string(count));
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    if (!strings[i]) value_error(std::string(arg) + "[" + std::to_string(i) + "] must not be NULL");
    out.emplace_back(strings[i]);
  }
  return out;
}

}  // namespace

extern "C" {

SW_API void sw_file_carrier_desc_init(sw_file_carrier_desc_t* desc) {
  if (!desc) return;
  *desc = sw_file_carrier_desc_t{};
  desc->struct_size = sizeof(sw_file_carrier_desc_t);
}

SW_API sw_error_t* sw_carrier_create_file(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          const sw_file_carrier_desc_t* desc, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_create_file");
    require(out_carrier, "out_carrier");
    const FileCarrierOptions options = file_options(desc, "sw_carrier_create_file");
    count_allocation(*rt, "File carrier");
    *out_carrier = to_handle<sw_carrier_t>(FileCarrier::create(rt, dtype, size, options));
  });
}

SW_API sw_error_t* sw_carrier_open_file(sw_runtime_t* runtime, sw_dtype_t dtype, const char* path,
                                        uint64_t byte_offset, size_t size, const sw_file_carrier_desc_t* desc,
                                        sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_open_file");
    require(path, "path");
    require(out_carrier, "out_carrier");
    const FileCarrierOptions options = file_options(desc, "sw_carrier_open_file");
    *out_carrier = to_handle<sw_carrier_t>(FileCarrier::open(rt, dtype, path, byte_offset, size, options));
  });
}

SW_API void sw_file_tensor_info_init(sw_file_tensor_info_t* info) {
  if (!info) return;
  *info = sw_file_tensor_info_t{};
  info->struct_size = sizeof(sw_file_tensor_info_t);
}

SW_API sw_error_t* sw_file_tensor_view(sw_tensor_t* tensor, const sw_file_tensor_info_t* info,
                                       sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(info, "info");
    require(out_view, "out_view");
    sw_file_tensor_info_t in;
    sw_file_tensor_info_init(&in);
    in = struct_in(info, in, "sw_file_tensor_view: info");
    if (in.rank != t->rank())
      value_error("sw_file_tensor_view: the tensor has " + std::to_string(t->rank()) + " modes, the file's tensor " +
                  std::to_string(in.rank));
    std::vector<size_t> perm(in.permutation, in.permutation + std::min<size_t>(in.rank, SW_MAX_RANK));
    std::vector<bool> seen(perm.size(), false);
    for (size_t p : perm) {
      if (p >= perm.size() || seen[p]) value_error("sw_file_tensor_view: info->permutation is not a permutation");
      seen[p] = true;
    }
    t->carrier().check_live("sw_file_tensor_view");
    *out_view = to_handle<sw_tensor_t>(t->view(t->offset(), t->layout().permute(perm)));
  });
}

SW_API sw_error_t* sw_carrier_open_file_segments(sw_runtime_t* runtime, sw_dtype_t dtype, const char* path,
                                                 const sw_file_segment_t* segments, size_t count,
                                                 const sw_file_carrier_desc_t* desc, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_open_file_segments");
    require(path, "path");
    require(out_carrier, "out_carrier");
    if (count && !segments) value_error("segments must not be NULL when count is " + std::to_string(count));
    const FileCarrierOptions options = file_options(desc, "sw_carrier_open_file_segments");
    std::vector<FileSegment> list;
    for (size_t i = 0; i < count; ++i) list.push_back({segments[i].byte_offset, segments[i].count});
    *out_carrier = to_handle<sw_carrier_t>(FileCarrier::open_segments(rt, dtype, path, list, options));
  });
}

SW_API sw_error_t* sw_carrier_open_npy(sw_runtime_t* runtime, const char* path, const sw_file_carrier_desc_t* desc,
                                       sw_file_tensor_info_t* out_info, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    require(path, "path");
    require(out_carrier, "out_carrier");
    check_info(out_info, "sw_carrier_open_npy: out_info");
    const FileCarrierOptions options = file_options(desc, "sw_carrier_open_npy");
    opened_out(rt, open_npy(rt, path, options), out_info, out_carrier, "sw_carrier_open_npy: out_info");
  });
}

SW_API sw_error_t* sw_carrier_open_safetensors(sw_runtime_t* runtime, const char* path, const char* name,
                                               const sw_file_carrier_desc_t* desc, sw_file_tensor_info_t* out_info,
                                               sw_carrier_t** out_carrier) {
  return open_named(runtime, path, name, desc, out_info, out_carrier, "sw_carrier_open_safetensors",
                    [](auto& rt, const char* p, const char* n, const auto& o) { return open_safetensors(rt, p, n, o); });
}

SW_API sw_error_t* sw_carrier_open_safetensors_stack(sw_runtime_t* runtime, const char* path,
                                                     const char* const* names, size_t count,
                                                     const sw_file_carrier_desc_t* desc,
                                                     sw_file_tensor_info_t* out_info, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    require(path, "path");
    require(out_carrier, "out_carrier");
    const std::vector<std::string> list = strings_arg(names, count, "names");
    check_info(out_info, "sw_carrier_open_safetensors_stack: out_info");
    const FileCarrierOptions options = file_options(desc, "sw_carrier_open_safetensors_stack");
    opened_out(rt, open_safetensors_stack(rt, path, list, options), out_info, out_carrier,
               "sw_carrier_open_safetensors_stack: out_info");
  });
}

SW_API sw_error_t* sw_carrier_open_safetensors_stack_files(sw_runtime_t* runtime, const char* const* paths,
                                                           const char* const* names, size_t count,
                                                           const sw_file_carrier_desc_t* desc,
                                                           sw_file_tensor_info_t* out_info,
                                                           sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    require(out_carrier, "out_carrier");
    const std::vector<std::string> files = strings_arg(paths, count, "paths");
    const std::vector<std::string> list = strings_arg(names, count, "names");
    check_info(out_info, "sw_carrier_open_safetensors_stack_files: out_info");
    const FileCarrierOptions options = file_options(desc, "sw_carrier_open_safetensors_stack_files");
    opened_out(rt, open_safetensors_stack_files(rt, files, list, options), out_info, out_carrier,
               "sw_carrier_open_safetensors_stack_files: out_info");
  });
}

SW_API sw_error_t* sw_carrier_open_raw_tensor(sw_runtime_t* runtime, const char* path, sw_dtype_t dtype,
                                              uint64_t byte_offset, const int64_t* shape, size_t rank,
                                              sw_file_order_t order, const sw_file_carrier_desc_t* desc,
                                              sw_file_tensor_info_t* out_info, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_open_raw_tensor");
    require(path, "path");
    require(out_carrier, "out_carrier");
    if (rank > SW_MAX_RANK)
      value_error("sw_carrier_open_raw_tensor: rank " + std::to_string(rank) + " exceeds SW_MAX_RANK (" +
                  std::to_string(SW_MAX_RANK) + ")");
    const std::vector<int64_t> extents = extents_arg(shape, rank, "shape");
    if (order != SW_FILE_ORDER_ROW_MAJOR && order != SW_FILE_ORDER_FIRST_MODE_FASTEST)
      value_error("sw_carrier_open_raw_tensor: order " + std::to_string(static_cast<int>(order)) +
                  " is neither SW_FILE_ORDER_ROW_MAJOR nor SW_FILE_ORDER_FIRST_MODE_FASTEST");
    check_info(out_info, "sw_carrier_open_raw_tensor: out_info");
    const FileCarrierOptions options = file_options(desc, "sw_carrier_open_raw_tensor");
    opened_out(rt, open_raw_tensor(rt, path, dtype, byte_offset, extents, order == SW_FILE_ORDER_ROW_MAJOR, options),
               out_info, out_carrier, "sw_carrier_open_raw_tensor: out_info");
  });
}

SW_API sw_error_t* sw_carrier_open_gguf(sw_runtime_t* runtime, const char* path, const char* name,
                                        const sw_file_carrier_desc_t* desc, sw_file_tensor_info_t* out_info,
                                        sw_carrier_t** out_carrier) {
  return open_named(runtime, path, name, desc, out_info, out_carrier, "sw_carrier_open_gguf",
                    [](auto& rt, const char* p, const char* n, const auto& o) { return open_gguf(rt, p, n, o); });
}

SW_API void sw_safetensors_save_desc_init(sw_safetensors_save_desc_t* desc) {
  if (!desc) return;
  *desc = sw_safetensors_save_desc_t{};
  desc->struct_size = sizeof(sw_safetensors_save_desc_t);
}

SW_API sw_error_t* sw_save_safetensors(const char* path, const char* const* names, sw_tensor_t* const* tensors,
                                       size_t count, const sw_safetensors_save_desc_t* desc) {
  return guard([&] {
    require(path, "path");
    sw_safetensors_save_desc_t d;
    sw_safetensors_save_desc_init(&d);
    if (desc) d = struct_in(desc, d, "sw_save_safetensors: desc");
    const std::vector<std::string> list = strings_arg(names, count, "names");
    if (count && !tensors) value_error("tensors must not be NULL when count is " + std::to_string(count));
    std::vector<std::pair<std::string, Ref<Tensor>>> entries;
    for (size_t i = 0; i < count; ++i)
      entries.emplace_back(list[i], ref<Tensor>(tensors[i], ("tensors[" + std::to_string(i) + "]").c_str()));
    const std::vector<std::string> keys = strings_arg(d.metadata_keys, d.metadata_count, "desc->metadata_keys");
    const std::vector<std::string> values = strings_arg(d.metadata_values, d.metadata_count, "desc->metadata_values");
    std::vector<std::pair<std::string, std::string>> metadata;
    for (size_t i = 0; i < keys.size(); ++i) metadata.emplace_back(keys[i], values[i]);
    save_safetensors(path, entries, metadata);
  });
}

SW_API void sw_gguf_save_desc_init(sw_gguf_save_desc_t* desc) {
  if (!desc) return;
  *desc = sw_gguf_save_desc_t{};
  desc->struct_size = sizeof(sw_gguf_save_desc_t);
}

SW_API sw_error_t* sw_save_gguf(const char* path, const char* const* names, sw_tensor_t* const* tensors, size_t count,
                                const sw_gguf_save_desc_t* desc) {
  return guard([&] {
    require(path, "path");
    sw_gguf_save_desc_t d;
    sw_gguf_save_desc_init(&d);
    if (desc) d = struct_in(desc, d, "sw_save_gguf: desc");
    const std::vector<std::string> list = strings_arg(names, count, "names");
    if (count && !tensors) value_error("tensors must not be NULL when count is " + std::to_string(count));
    std::vector<std::pair<std::string, Ref<Tensor>>> entries;
    for (size_t i = 0; i < count; ++i)
      entries.emplace_back(list[i], ref<Tensor>(tensors[i], ("tensors[" + std::to_string(i) + "]").c_str()));
    const std::vector<std::string> keys = strings_arg(d.metadata_keys, d.metadata_count, "desc->metadata_keys");
    if (d.metadata_count && (!d.metadata_types || !d.metadata_values))
      value_error("sw_save_gguf: desc->metadata_types and metadata_values must not be NULL when metadata_count is " +
                  std::to_string(d.metadata_count));
    std::vector<std::pair<std::string, GgufValue>> metadata;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string what = "sw_save_gguf: metadata '" + keys[i] + "'";
      const uint32_t type = static_cast<uint32_t>(d.metadata_types[i]);
      const void* p = d.metadata_values[i];
      if (!gguf_value_type_name(type)) value_error(what + ": unknown value type " + std::to_string(type));
      if (type == SW_GGUF_TYPE_ARRAY) unsupported_error(what + ": array values are not written");
      if (!p) value_error(what + ": the value must not be NULL");
      GgufValue v;
      v.type = type;
      if (type == SW_GGUF_TYPE_STRING) {
        v.text = static_cast<const char*>(p);
      } else if (type == SW_GGUF_TYPE_BOOL) {
        v.bits = *static_cast<const bool*>(p) ? 1 : 0;
      } else {
        std::memcpy(&v.bits, p, gguf_value_size(type));  // little-endian host: the low bytes
      }
      metadata.emplace_back(keys[i], std::move(v));
    }
    save_gguf(path, entries, metadata, d.alignment ? d.alignment : kGgufDefaultAlignment);
  });
}

SW_API sw_error_t* sw_save_npy(const char* path, sw_tensor_t* tensor) {
  return guard([&] {
    require(path, "path");
    save_npy(path, ref<Tensor>(tensor, "tensor"));
  });
}

// ---- testing hooks ----------------------------------------------------------

SW_API sw_error_t* sw_testing_parse_npy_header(const void* data, size_t size, uint64_t file_size,
                                               sw_file_tensor_info_t* out_info) {
  return guard([&] {
    if (size && !data) value_error("data must not be NULL when size is " + std::to_string(size));
    check_info(out_info, "sw_testing_parse_npy_header: out_info");
    const uint64_t whole = file_size ? file_size : size;
    const StoredTensor t = parse_npy_header(static_cast<const std::byte*>(data), size, whole, "npy buffer");
    info_out(out_info, t.dtype, t.shape, !t.fortran_order, t.offset, t.bytes, 1, "sw_testing_parse_npy_header: out_info");
  });
}

SW_API sw_error_t* sw_testing_parse_safetensors_header(const void* data, size_t size, uint64_t file_size,
                                                       const char* name, size_t* out_count,
                                                       sw_file_tensor_info_t* out_info) {
  return guard([&] {
    if (size && !data) value_error("data must not be NULL when size is " + std::to_string(size));
    check_info(out_info, "sw_testing_parse_safetensors_header: out_info");
    const uint64_t whole = file_size ? file_size : size;
    const SafetensorsHeader h =
        parse_safetensors_header(static_cast<const std::byte*>(data), size, whole, "safetensors buffer");
    const StoredTensor* t = nullptr;
    if (name) {
      t = h.find(name);
      if (!t) value_error(std::string("safetensors buffer holds no tensor named '") + name + "'");
    }
    if (out_count) *out_count = h.tensors.size();
    if (t) info_out(out_info, t->dtype, t->shape, true, t->offset, t->bytes, 1, "sw_testing_parse_safetensors_header: out_info");
  });
}

SW_API sw_error_t* sw_testing_parse_gguf_header(const void* data, size_t size, uint64_t file_size, const char* name,
                                                size_t* out_tensor_count, size_t* out_metadata_count,
                                                sw_file_tensor_info_t* out_info) {
  return guard([&] {
    if (size && !data) value_error("data must not be NULL when size is " + std::to_string(size));
    check_info(out_info, "sw_testing_parse_gguf_header: out_info");
    const uint64_t whole = file_size ? file_size : size;
    const std::string source = "GGUF buffer";
    const GgufHeader h = parse_gguf_header(static_cast<const std::byte*>(data), size, whole, source);
    const GgufTensor* t = nullptr;
    sw_dtype_t dtype = SW_DTYPE_INVALID;
    if (name) {
      t = h.find(name);
      if (!t) value_error(source + " holds no tensor named '" + name + "'");
      dtype = gguf_tensor_dtype(*t, source);
    }
    if (out_tensor_count) *out_tensor_count = h.tensors.size();
    if (out_metadata_count) *out_metadata_count = h.metadata.size();
    if (t)
      info_out(out_info, dtype, t->shape(), true, t->offset, t->bytes, 1, "sw_testing_parse_gguf_header: out_info");
  });
}

SW_API void sw_file_io_stats_init(sw_file_io_stats_t* stats) {
  if (!stats) return;
  *stats = sw_file_io_stats_t{};
  stats->struct_size = sizeof(sw_file_io_stats_t);
}

SW_API sw_error_t* sw_testing_file_io_stats(const sw_carrier_t* carrier, sw_file_io_stats_t* out_stats) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_stats, "out_stats");
    (void)checked_struct_size<sw_file_io_stats_t>(out_stats->struct_size, "sw_testing_file_io_stats: out_stats");
    const FileCarrier* f = as_file_carrier(c, "sw_testing_file_io_stats");
    const FileIoStats s = f->io_stats();
    sw_file_io_stats_t out;
    sw_file_io_stats_init(&out);
    out.direct_bytes = s.direct_bytes;
    out.bounce_bytes = s.bounce_bytes;
    out.buffered_bytes = s.buffered_bytes;
    out.direct_open = s.direct_open;
    struct_out(out_stats, out, "sw_testing_file_io_stats: out_stats");
  });
}

SW_API void sw_file_carrier_io_init(sw_file_carrier_io_t* io) {
  if (!io) return;
  *io = sw_file_carrier_io_t{};
  io->struct_size = sizeof(sw_file_carrier_io_t);
}

SW_API sw_error_t* sw_file_carrier_io(const sw_carrier_t* carrier, sw_file_carrier_io_t* out_io) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_io, "out_io");
    (void)checked_struct_size<sw_file_carrier_io_t>(out_io->struct_size, "sw_file_carrier_io: out_io");
    const FileCarrier* f = as_file_carrier(c, "sw_file_carrier_io");
    const DeviceProfile& p = f->device_profile();
    sw_file_carrier_io_t out;
    sw_file_carrier_io_init(&out);
    out.chunk_bytes = f->chunk_bytes();
    out.requests_in_flight = f->requests_in_flight();
    out.direct_io = f->io_stats().direct_open;
    out.source = static_cast<sw_io_profile_source_t>(p.source);
    out.device = p.device;
    out.device_read_bytes_per_second = p.read_bytes_per_second;
    struct_out(out_io, out, "sw_file_carrier_io: out_io");
  });
}

SW_API void sw_io_queue_stats_init(sw_io_queue_stats_t* stats) {
  if (!stats) return;
  *stats = sw_io_queue_stats_t{};
  stats->struct_size = sizeof(sw_io_queue_stats_t);
}

SW_API sw_error_t* sw_testing_io_queue_stats(sw_runtime_t* runtime, sw_io_queue_stats_t* out_stats) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    require(out_stats, "out_stats");
    (void)checked_struct_size<sw_io_queue_stats_t>(out_stats->struct_size, "sw_testing_io_queue_stats: out_stats");
    // The queue lives on the loop thread.
    IoQueueStats s;
    uint32_t slots = 0, prefetch_slots = 0;
    bool ring = false;
    uint64_t ring_requests = 0;
    // The shared slots' counts, and the requests of every device's own.
    auto read = [&] {
      ring = rt->loop().has_ring();
      ring_requests = rt->loop().ring_requests();
      slots = rt->file_io().slots();
      prefetch_slots = rt->file_io().prefetch_slots();
      rt->for_each_file_io([&](const IoQueue& q) {
        const IoQueueStats& q_stats = q.stats();
        for (int c = 0; c < 2; ++c) {
          s.granted[c] += q_stats.granted[c];
          s.max_in_flight[c] = std::max(s.max_in_flight[c], q_stats.max_in_flight[c]);
        }
        s.max_total = std::max(s.max_total, q_stats.max_total);
      });
    };
    if (rt->on_loop_thread()) {
      read();
    } else {
      std::promise<void> done;
      if (!rt->loop().post([&] {
            read();
            done.set_value();
          }))
        state_error("sw_testing_io_queue_stats: the runtime has been shut down");
      done.get_future().wait();
    }
    sw_io_queue_stats_t out;
    sw_io_queue_stats_init(&out);
    out.slots = slots;
    out.prefetch_slots = prefetch_slots;
    out.demand_requests = s.granted[0];
    out.prefetch_requests = s.granted[1];
    out.max_demand_in_flight = s.max_in_flight[0];
    out.max_prefetch_in_flight = s.max_in_flight[1];
    out.max_in_flight = s.max_total;
    out.io_uring = ring;
    out.ring_requests = ring_requests;
    struct_out(out_stats, out, "sw_testing_io_queue_stats: out_stats");
  });
}

}  // extern "C"
