#include "carriers/file/model_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "base/error.hpp"
#include "base/text.hpp"
#include "core/dtype.hpp"
#include "core/iteration.hpp"
#include "core/runtime.hpp"

namespace sw {

namespace {

// Bytes of values a save reads and writes at a time.
constexpr size_t kSaveChunkBytes = size_t{32} << 20;
// Elements per chunk when the values are scattered over their carrier
// (each element its own run of slots).
constexpr int64_t kScatteredChunkElements = int64_t{1} << 20;

std::string errno_text(int error_number) {
  char text[256];
  return std::string(strerror_r(error_number, text, sizeof text));
}

// A file opened for reading its header; closed with the object. Each read
// is one SW_FAULT_READ operation of `runtime` (strideweave_testing.h).
class HeaderFile {
 public:
  HeaderFile(Runtime& runtime, const std::string& path) : runtime_(runtime), path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_error(SW_ERROR_IO, "cannot open '" + path + "': " + errno_text(errno));
    // The destructor does not run when the constructor throws: close first.
    auto fail = [&](const std::string& what, int error_number) {
      ::close(fd_);
      throw_error(SW_ERROR_IO, what + " '" + path + "': " + errno_text(error_number));
    };
    struct stat st;
    if (::fstat(fd_, &st) != 0) fail("cannot stat", errno);
    if (S_ISDIR(st.st_mode)) fail("cannot open", EISDIR);
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    if (end < 0) fail("cannot find the end of", errno);
    size_ = static_cast<uint64_t>(end);
    identity_ = {st.st_dev, st.st_ino};
  }
  ~HeaderFile() { ::close(fd_); }
  HeaderFile(const HeaderFile&) = delete;
  HeaderFile& operator=(const HeaderFile&) = delete;

  uint64_t size() const { return size_; }
  // Which file this is, whatever path led to it.
  std::pair<dev_t, ino_t> identity() const { return identity_; }
  // The file's first min(n, size) bytes.
  std::vector<std::byte> head(uint64_t n) const {
    runtime_.check_fault(FaultKind::kRead, ("header read of '" + path_ + "'").c_str());
    std::vector<std::byte> out(static_cast<size_t>(std::min(n, size_)));
    for (size_t done = 0; done < out.size();) {
      const ssize_t r = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw_error(SW_ERROR_IO, "cannot read the header of '" + path_ + "': " + errno_text(errno));
      if (r == 0) throw_error(SW_ERROR_IO, "cannot read the header of '" + path_ + "': the file shrank while it was read");
      done += static_cast<size_t>(r);
    }
    return out;
  }

 private:
  Runtime& runtime_;
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::pair<dev_t, ino_t> identity_{};
};

std::string npy_source(const std::string& path) { return "npy file '" + path + "'"; }
std::string safetensors_source(const std::string& path) { return "safetensors file '" + path + "'"; }
std::string gguf_source(const std::string& path) { return "GGUF file '" + path + "'"; }

// Bytes of a GGUF file's start read first; most headers (llama.cpp's
// tokenizer metadata included) need a few MiB at most.
constexpr uint64_t kGgufFirstRead = uint64_t{1} << 20;

// A TiledEvictable holds at least one element per mode: refuse what it cannot.
void check_tileable(const std::vector<int64_t>& shape, const std::string& what) {
  if (shape.empty())
    value_error(what + " is a scalar (shape ()), which cannot be a TiledEvictable's tier; read it with sw_carrier_open_file");
  for (int64_t e : shape)
    if (e == 0) value_error(what + " has no elements (shape " + shape_text(shape) + "); a TiledEvictable needs at least one per mode");
}

OpenedTensor finish(Ref<FileCarrier> carrier, sw_dtype_t dtype, std::vector<int64_t> shape, bool row_major,
                    uint64_t offset, size_t segments) {
  OpenedTensor o;
  o.carrier = std::move(carrier);
  o.dtype = dtype;
  o.row_major = row_major;
  o.data_offset = offset;
  o.data_bytes = o.carrier->bytes_of(o.carrier->size());
  o.segments = segments;
  o.geometry = file_tensor_geometry(shape, row_major);
  o.shape = std::move(shape);
  return o;
}

}  // namespace

StoredTensor read_npy_header(Runtime& runtime, const std::string& path) {
  HeaderFile f(runtime, path);
  const std::string source = npy_source(path);
  const std::vector<std::byte> prefix = f.head(kNpyPrefixBytes);
  const uint64_t length = npy_header_length(prefix.data(), prefix.size(), f.size(), source);
  const std::vector<std::byte> header = f.head(length);
  return parse_npy_header(header.data(), header.size(), f.size(), source);
}

namespace {

SafetensorsHeader read_safetensors_header(const HeaderFile& f, const std::string& path) {
  const std::string source = safetensors_source(path);
  const std::vector<std::byte> prefix = f.head(8);
  const uint64_t length = safetensors_header_length(prefix.data(), prefix.size(), f.size(), source);
  const std::vector<std::byte> header = f.head(8 + length);
  return parse_safetensors_header(header.data(), header.size(), f.size(), source);
}

}  // namespace

SafetensorsHeader read_safetensors_header(Runtime& runtime, const std::string& path) {
  return read_safetensors_header(HeaderFile(runtime, path), path);
}

GgufHeader read_gguf_header(Runtime& runtime, const std::string& path) {
  const HeaderFile f(runtime, path);
  const std::string source = gguf_source(path);
  uint64_t want = std::min(f.size(), kGgufFirstRead);
  for (;;) {
    const std::vector<std::byte> head = f.head(want);
    uint64_t more = 0;
    GgufHeader h = parse_gguf_header(head.data(), head.size(), f.size(), source, &more);
    if (more == 0) return h;
    if (more > kGgufMaxHeaderBytes)
      throw_error(SW_ERROR_DATA_CORRUPT,
                  source + ": header: longer than the limit of " + std::to_string(kGgufMaxHeaderBytes) + " bytes");
    want = std::min(f.size(), std::max(more, std::min(want * 2, kGgufMaxHeaderBytes)));
  }
}

OpenedTensor open_npy(const Ref<Runtime>& runtime, const std::string& path, const FileCarrierOptions& options) {
  const StoredTensor t = read_npy_header(*runtime, path);
  check_tileable(t.shape, "the array of " + npy_source(path));
  const int64_t n = static_cast<int64_t>(t.bytes / dtype_size(t.dtype));
  auto carrier = FileCarrier::open(runtime, t.dtype, path, t.offset, static_cast<size_t>(n), options);
  return finish(std::move(carrier), t.dtype, t.shape, !t.fortran_order, t.offset, 1);
}

OpenedTensor open_safetensors(const Ref<Runtime>& runtime, const std::string& path, const std::string& name,
                              const FileCarrierOptions& options) {
  const SafetensorsHeader h = read_safetensors_header(*runtime, path);
  const StoredTensor* t = h.find(name);
  if (!t) value_error(safetensors_source(path) + " holds no tensor named '" + name + "'");
  check_tileable(t->shape, "tensor '" + name + "' of " + safetensors_source(path));
  auto carrier = FileCarrier::open(runtime, t->dtype, path, t->offset, static_cast<size_t>(t->bytes / dtype_size(t->dtype)), options);
  return finish(std::move(carrier), t->dtype, t->shape, true, t->offset, 1);
}

OpenedTensor open_safetensors_stack(const Ref<Runtime>& runtime, const std::string& path,
                                    const std::vector<std::string>& names, const FileCarrierOptions& options) {
  if (names.empty()) value_error("opening tensors of " + safetensors_source(path) + ": no tensor names given");
  return open_safetensors_stack_files(runtime, std::vector<std::string>(names.size(), path), names, options);
}

OpenedTensor open_safetensors_stack_files(const Ref<Runtime>& runtime, const std::vector<std::string>& paths,
                                          const std::vector<std::string>& names, const FileCarrierOptions& options) {
  if (names.empty()) value_error("opening a stack of safetensors tensors: no tensor names given");
  if (paths.size() != names.size())
    value_error("opening a stack of safetensors tensors: " + std::to_string(names.size()) + " names but " +
                std::to_string(paths.size()) + " paths");
  // Each file once, however many tensors it gives and whatever path names
  // it: its header read and parsed, its place in the carrier's file list.
  struct Shard {
    std::string path;  // the first path that named it
    SafetensorsHeader header;
  };
  std::vector<Shard> shards;
  std::map<std::string, size_t> by_path;
  std::map<std::pair<dev_t, ino_t>, size_t> by_identity;
  std::vector<size_t> shard_of(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (const auto it = by_path.find(paths[i]); it != by_path.end()) {
      shard_of[i] = it->second;
      continue;
    }
    const HeaderFile f(*runtime, paths[i]);
    const auto [it, added] = by_identity.emplace(f.identity(), shards.size());
    if (added) shards.push_back({paths[i], read_safetensors_header(f, paths[i])});
    shard_of[i] = by_path[paths[i]] = it->second;
  }
  auto source_of = [&](size_t i) { return safetensors_source(shards[shard_of[i]].path); };

  std::set<std::pair<size_t, std::string>> seen;
  std::vector<const StoredTensor*> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (!seen.insert({shard_of[i], name}).second)
      value_error("tensor '" + name + "' is named twice in the list for " + source_of(i));
    const StoredTensor* t = shards[shard_of[i]].header.find(name);
    if (!t) value_error(source_of(i) + " holds no tensor named '" + name + "'");
    if (!parts.empty()) {
      const StoredTensor& first = *parts.front();
      // The first tensor's file, when it is another one.
      const std::string first_of = shard_of[0] == shard_of[i] ? "" : " of " + source_of(0);
      if (t->dtype != first.dtype)
        value_error("tensor '" + name + "' of " + source_of(i) + " is " + safetensors_dtype_name(t->dtype) + ", but '" +
                    first.name + "'" + first_of + " is " + safetensors_dtype_name(first.dtype) +
                    ": one carrier holds one dtype");
      if (t->shape != first.shape)
        value_error("tensor '" + name + "' of " + source_of(i) + " has shape " + shape_text(t->shape) + ", but '" +
                    first.name + "'" + first_of + " has " + shape_text(first.shape) +
                    ": stacked tensors share one shape");
    }
    parts.push_back(t);
  }
  std::vector<int64_t> shape = parts.front()->shape;
  if (shape.size() + 1 > SW_MAX_RANK)
    value_error("stacking tensors of rank " + std::to_string(shape.size()) + " of " + source_of(0) +
                " would exceed SW_MAX_RANK (" + std::to_string(SW_MAX_RANK) + ")");
  shape.insert(shape.begin(), static_cast<int64_t>(names.size()));
  check_tileable(shape, "the stack of tensors '" + names.front() + "', ... of " + source_of(0) +
                            (shards.size() > 1 ? " and " + std::to_string(shards.size() - 1) + " other files" : ""));
  std::vector<std::string> files;
  for (const Shard& shard : shards) files.push_back(shard.path);
  std::vector<FileSegment> segments;
  for (size_t i = 0; i < parts.size(); ++i)
    segments.push_back(
        {parts[i]->offset, static_cast<size_t>(parts[i]->bytes / dtype_size(parts[i]->dtype)), shard_of[i]});
  auto carrier = FileCarrier::open_segments(runtime, parts.front()->dtype, files, segments, options);
  return finish(std::move(carrier), parts.front()->dtype, std::move(shape), true, parts.front()->offset, names.size());
}

OpenedTensor open_gguf(const Ref<Runtime>& runtime, const std::string& path, const std::string& name,
                       const FileCarrierOptions& options) {
  const GgufHeader h = read_gguf_header(*runtime, path);
  const std::string source = gguf_source(path);
  const GgufTensor* t = h.find(name);
  if (!t) value_error(source + " holds no tensor named '" + name + "'");
  const sw_dtype_t dtype = gguf_tensor_dtype(*t, source);
  std::vector<int64_t> shape = t->shape();
  check_tileable(shape, "tensor '" + name + "' of " + source);
  // Slots are elements, also for a block-quantized type (whole blocks along
  // ne[0], the first mode).
  auto carrier = FileCarrier::open(runtime, dtype, path, t->offset,
                                   static_cast<size_t>(dtype_elements_in(dtype, t->bytes)), options);
  return finish(std::move(carrier), dtype, std::move(shape), true, t->offset, 1);
}

OpenedTensor open_raw_tensor(const Ref<Runtime>& runtime, const std::string& path, sw_dtype_t dtype, uint64_t offset,
                             const std::vector<int64_t>& shape, bool row_major, const FileCarrierOptions& options) {
  if (shape.size() > SW_MAX_RANK)
    value_error("raw tensor of '" + path + "': rank " + std::to_string(shape.size()) + " exceeds SW_MAX_RANK");
  check_tileable(shape, "the raw tensor of '" + path + "'");
  const int64_t n = checked_product(shape);
  auto carrier = FileCarrier::open(runtime, dtype, path, offset, static_cast<size_t>(n), options);
  return finish(std::move(carrier), dtype, shape, row_major, offset, 1);
}

// ---- saving -------------------------------------------------------------

namespace {

// A file written under a temporary name beside `path` and renamed over it
// by commit(); removed if never committed.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path) : path_(path) {
    static std::atomic<uint64_t> counter{0};
    for (int attempt = 0; attempt < 100; ++attempt) {
      temp_ = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0 || errno != EEXIST) break;
    }
    if (fd_ < 0) throw_error(SW_ERROR_IO, "cannot create '" + path + "' (writing '" + temp_ + "'): " + errno_text(errno));
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes) {
    const auto* p = static_cast<const std::byte*>(data);
    for (size_t done = 0; done < bytes;) {
      const ssize_t n = ::pwrite(fd_, p + done, bytes - done, static_cast<off_t>(at_));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw_error(SW_ERROR_IO, "writing '" + path_ + "' at byte " + std::to_string(at_) + " failed: " + errno_text(n < 0 ? errno : EIO));
      done += static_cast<size_t>(n);
      at_ += static_cast<uint64_t>(n);
    }
  }
  // On the disk before it takes the name: a crash leaves the old file or
  // the whole new one, and the first reader of the new one (with O_DIRECT,
  // as the model-file tiers read) does not wait for its pages' writeback.
  void commit() {
    int rc;
    do {
      rc = ::fsync(fd_);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) throw_error(SW_ERROR_IO, "writing '" + path_ + "' failed (fsync): " + errno_text(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_error(SW_ERROR_IO, "writing '" + path_ + "' failed: " + errno_text(errno));
    if (::rename(temp_.c_str(), path_.c_str()) != 0)
      throw_error(SW_ERROR_IO, "cannot rename '" + temp_ + "' to '" + path_ + "': " + errno_text(errno));
    committed_ = true;
    // The new name itself: the directory's entry. Best effort (a directory
    // that cannot be opened or synced leaves the file written).
    const size_t slash = path_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_, temp_;
  int fd_ = -1;
  uint64_t at_ = 0;
  bool committed_ = false;
};

// Writes `t`'s values chunk by chunk: in row-major order of its indexing,
// or, for a block-quantized dtype, its blocks first mode fastest (GGUF's
// order: the blocks run along ne[0], which is the first mode).
void write_values(AtomicFile& out, const Tensor& t) {
  const Tensor::Units u = t.units();  // blocks of a quantized dtype, elements otherwise
  const int64_t total = u.layout->size();
  if (total == 0) return;
  const Carrier& c = t.carrier();
  const size_t es = u.unit_bytes;
  const auto unit = static_cast<int64_t>(dtype_block_elements(t.dtype()));  // slots per unit
  Ref<Layout> order = u.layout;
  if (!dtype_is_quantized(t.dtype()) && u.layout->rank() > 1) {
    // The modes reversed: their first-mode-fastest order is t's row-major order.
    std::vector<size_t> reverse(u.layout->rank());
    for (size_t i = 0; i < reverse.size(); ++i) reverse[i] = reverse.size() - 1 - i;
    order = u.layout->permute(reverse);
  }
  Iteration it;
  if (!build_iteration({order.get()}, &it)) internal_error("save: no iteration over one layout");
  const bool contiguous = it.dims.empty() || it.dims[0].stride[0] == 1;
  int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(kSaveChunkBytes / es));
  if (const size_t g = c.read_granule()) {
    const int64_t g_units = std::max<int64_t>(1, static_cast<int64_t>(g) / unit);
    chunk = std::max<int64_t>(1, chunk / g_units) * g_units;
  }
  if (!contiguous) chunk = std::min(chunk, kScatteredChunkElements);
  chunk = std::min(chunk, total);
  std::vector<std::byte> buffer(static_cast<size_t>(chunk) * es);
  StoragePin pin(c, "save");
  const std::byte* host = c.host_data();
  std::vector<SlotRun> runs;
  for (int64_t begin = 0; begin < total; begin += chunk) {
    const int64_t end = std::min(total, begin + chunk);
    std::byte* to = buffer.data();
    runs.clear();
    walk(it, begin, end, [&](const int64_t* off, int64_t count, const int64_t* step) {
      const int64_t first = u.offset + off[0];
      if (host) {
        if (step[0] == 1) {
          std::memcpy(to, host + first * static_cast<int64_t>(es), static_cast<size_t>(count) * es);
        } else {
          for (int64_t i = 0; i < count; ++i)
            std::memcpy(to + i * static_cast<int64_t>(es), host + (first + i * step[0]) * static_cast<int64_t>(es), es);
        }
        to += count * static_cast<int64_t>(es);
        return;
      }
      // Carriers read slots: a unit is `unit` consecutive slots.
      auto add_run = [&](int64_t first_unit, int64_t units) {
        const auto slot = static_cast<size_t>(first_unit * unit), n = static_cast<size_t>(units * unit);
        if (!runs.empty() && runs.back().first + runs.back().count == slot) runs.back().count += n;
        else runs.push_back({slot, n});
      };
      if (step[0] == 1) {
        add_run(first, count);
      } else {
        for (int64_t i = 0; i < count; ++i) add_run(first + i * step[0], 1);
      }
    });
    if (!host) c.read_runs(runs, buffer.data());
    out.write(buffer.data(), static_cast<size_t>(end - begin) * es);
  }
}

void check_saveable(const Tensor& t, const std::string& what) {
  t.carrier().check_live(what.c_str());
  t.carrier().check_not_tier(what.c_str());
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp, min;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; min = 0x10000; }
    else return false;
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const unsigned char t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (t & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Ref<Tensor>>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata) {
  const std::string target = "saving safetensors file '" + path + "'";
  std::set<std::string> names;
  std::vector<StoredTensor> stored;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) value_error(target + ": a tensor name is empty");
    if (name == "__metadata__") value_error(target + ": '__metadata__' is reserved for the metadata, not a tensor name");
    if (!valid_utf8(name)) value_error(target + ": a tensor name is not valid UTF-8");
    if (!names.insert(name).second) value_error(target + ": tensor '" + name + "' is named twice");
    const char* dtype = safetensors_dtype_name(tensor->dtype());
    if (!dtype) type_error(target + ": tensor '" + name + "' has dtype " + dtype_name(tensor->dtype()) + ", which safetensors cannot hold");
    check_saveable(*tensor, target);
    StoredTensor s;
    s.name = name;
    s.dtype = tensor->dtype();
    s.shape = tensor->shape();
    s.bytes = static_cast<uint64_t>(tensor->numel()) * dtype_size(s.dtype);
    stored.push_back(std::move(s));
  }
  std::set<std::string> keys;
  for (const auto& [key, value] : metadata) {
    if (!valid_utf8(key) || !valid_utf8(value)) value_error(target + ": a metadata key or value is not valid UTF-8");
    if (!keys.insert(key).second) value_error(target + ": metadata key '" + key + "' is given twice");
  }
  const std::string header = safetensors_header(stored, metadata);
  AtomicFile out(path);
  out.write(header.data(), header.size());
  for (const auto& entry : tensors) write_values(out, *entry.second);
  out.commit();
}

void save_npy(const std::string& path, const Ref<Tensor>& tensor) {
  const std::string target = "saving npy file '" + path + "'";
  if (tensor->dtype() == SW_DTYPE_BF16)
    unsupported_error(target + ": dtype: npy has no bf16 dtype (NumPy has none); save it with sw_save_safetensors");
  if (dtype_is_quantized(tensor->dtype()))
    type_error(target + ": dtype: npy has no " + dtype_name(tensor->dtype()) + " dtype (a block-quantized dtype)");
  check_saveable(*tensor, target);
  const std::string header = npy_header(tensor->dtype(), tensor->shape(), target);
  AtomicFile out(path);
  out.write(header.data(), header.size());
  write_values(out, *tensor);
  out.commit();
}

void save_gguf(const std::string& path, const std::vector<std::pair<std::string, Ref<Tensor>>>& tensors,
               const std::vector<std::pair<std::string, GgufValue>>& metadata, uint32_t alignment) {
  const std::string target = "saving GGUF file '" + path + "'";
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    value_error(target + ": alignment " + std::to_string(alignment) + " is not a power of two");
  std::set<std::string> names;
  std::vector<GgufTensorOut> stored;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) value_error(target + ": a tensor name is empty");
    if (!valid_utf8(name)) value_error(target + ": a tensor name is not valid UTF-8");
    if (!names.insert(name).second) value_error(target + ": tensor '" + name + "' is named twice");
    const GgufType* type = gguf_type_of(tensor->dtype());
    if (!type)
      type_error(target + ": tensor '" + name + "' has dtype " + dtype_name(tensor->dtype()) +
                 ", which GGUF cannot hold");
    if (tensor->rank() > kGgufMaxDims)
      value_error(target + ": tensor '" + name + "' has " + std::to_string(tensor->rank()) +
                  " modes; GGUF tensors have at most " + std::to_string(kGgufMaxDims));
    GgufTensorOut s;
    s.name = name;
    s.type = type;
    if (dtype_is_quantized(tensor->dtype())) {
      // ggml's ne[0] is the mode its blocks run along, which is the first
      // mode of a quantized tensor: ne is the shape as it is.
      if (tensor->rank() == 0 || tensor->shape()[0] % type->block != 0)
        value_error(target + ": tensor '" + name + "' of dtype " + dtype_name(tensor->dtype()) + " has shape " +
                    shape_text(tensor->shape()) + ", whose first mode (GGUF's ne[0]) is not a multiple of its " +
                    std::to_string(type->block) + "-element blocks");
      s.ne = tensor->shape();
    } else {
      s.ne.assign(tensor->shape().rbegin(), tensor->shape().rend());
    }
    check_saveable(*tensor, target);
    s.bytes = static_cast<uint64_t>(tensor->numel()) / type->block * type->bytes;
    stored.push_back(std::move(s));
  }
  std::set<std::string> keys;
  for (const auto& [key, value] : metadata) {
    if (key.empty()) value_error(target + ": a metadata key is empty");
    if (!valid_utf8(key)) value_error(target + ": a metadata key is not valid UTF-8");
    if (!keys.insert(key).second) value_error(target + ": metadata key '" + key + "' is given twice");
    if (key == "general.alignment")
      value_error(target + ": metadata key 'general.alignment' is written from the alignment; do not give it");
    if (value.type == static_cast<uint32_t>(GgufValueType::kString) && !valid_utf8(value.text))
      value_error(target + ": the value of metadata key '" + key + "' is not valid UTF-8");
  }
  const std::string header = gguf_header(stored, metadata, alignment);
  AtomicFile out(path);
  out.write(header.data(), header.size());
  uint64_t at = header.size();
  const std::vector<char> zeros(alignment, 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (stored[i].offset > at) out.write(zeros.data(), static_cast<size_t>(stored[i].offset - at));
    write_values(out, *tensors[i].second);
    at = stored[i].offset + stored[i].bytes;
  }
  // The data section ends padded too, as llama.cpp's reader sizes it.
  if (at % alignment) out.write(zeros.data(), static_cast<size_t>(alignment - at % alignment));
  out.commit();
}

}  // namespace sw
