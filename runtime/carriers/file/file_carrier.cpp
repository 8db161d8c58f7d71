#include "carriers/file/file_carrier.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "async/loop.hpp"
#include "async/worker_pool.hpp"
#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw {

namespace {

// O_DIRECT needs the file offset, the length and the host address aligned to
// the logical block size; 4096 covers every common device.
constexpr size_t kDirectAlignment = 4096;
// Larger requests gain nothing and Linux caps one read at ~2 GiB anyway.
constexpr size_t kMaxChunkBytes = size_t{1} << 30;
// Scratch files at least this large are closed by a worker (see close_file).
constexpr uint64_t kDeferredCloseBytes = uint64_t{16} << 20;

std::string describe_errno(int error_number) {
  char text[256];
  // GNU strerror_r: thread-safe, returns the message (maybe not in `text`).
  return std::string(strerror_r(error_number, text, sizeof text));
}

size_t region_bytes(sw_dtype_t dtype, size_t size) {
  check_whole_blocks(dtype, size, "file carrier");
  size_t bytes;
  if (__builtin_mul_overflow(size / dtype_block_elements(dtype), dtype_block_bytes(dtype), &bytes) ||
      bytes > static_cast<size_t>(INT64_MAX))
    value_error("file carrier: " + std::to_string(size) + " slots of " + dtype_name(dtype) +
                " overflow a file offset");
  return bytes;
}

// The size of the open file `fd` (IO naming `path` on failure, or when it
// is a directory).
uint64_t file_size_of(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) throw_error(SW_ERROR_IO, "cannot stat '" + path + "': " + describe_errno(errno));
  if (S_ISDIR(st.st_mode)) throw_error(SW_ERROR_IO, "cannot open '" + path + "': " + describe_errno(EISDIR));
  // lseek rather than st_size so that block devices report their size too.
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) throw_error(SW_ERROR_IO, "cannot find the end of '" + path + "': " + describe_errno(errno));
  return static_cast<uint64_t>(end);
}

std::string default_directory() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir && *tmpdir ? std::string(tmpdir) : std::string("/tmp");
}

}  // namespace

FileCarrier::FileCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, const FileCarrierOptions& options)
    : Carrier(std::move(runtime), SW_CARRIER_FILE, dtype, size),
      options_(options),
      direct_io_(options.direct_io) {}

IoQueue& FileCarrier::io_queue() {
  if (profile_.source == ProfileSource::kDefault || options_.requests_in_flight) return runtime().file_io();
  return runtime().file_io(profile_.device, profile_.requests_in_flight);
}

void FileCarrier::resolve_io(uint64_t file_bytes, bool may_probe) {
  const OpenFile& file = *files_.front();
  struct stat st;
  if (::fstat(file.fd, &st) == 0) {
    profile_.device = static_cast<uint64_t>(st.st_dev);
    if ((!options_.chunk_bytes || !options_.requests_in_flight) && direct_io_ && file.direct_usable())
      profile_ = direct_read_profile(runtime(), profile_.device, file.direct_fd, file_bytes, file.path, may_probe);
  }
  chunk_bytes_ = options_.chunk_bytes ? options_.chunk_bytes : profile_.chunk_bytes;
  chunk_bytes_ = std::min(std::max<size_t>(chunk_bytes_, 1), kMaxChunkBytes);
  requests_in_flight_ = std::max<uint32_t>(options_.requests_in_flight ? options_.requests_in_flight
                                                                        : profile_.requests_in_flight,
                                           1);
  // With O_DIRECT every whole chunk must stay aligned.
  if (direct_io_) chunk_bytes_ = (chunk_bytes_ + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
}

FileCarrier::~FileCarrier() { close_file(); }

Ref<FileCarrier> FileCarrier::create(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size,
                                     const FileCarrierOptions& options) {
  const size_t bytes = region_bytes(dtype, size);
  const std::string directory = options.directory.empty() ? default_directory() : options.directory;
  struct stat st;
  if (::stat(directory.c_str(), &st) != 0)
    throw_error(SW_ERROR_IO, "cannot create a file carrier in directory '" + directory + "': " + describe_errno(errno));
  if (!S_ISDIR(st.st_mode))
    throw_error(SW_ERROR_IO, "cannot create a file carrier in directory '" + directory + "': " + describe_errno(ENOTDIR));

  std::string name = directory;
  if (name.back() != '/') name += '/';
  name += "strideweave-XXXXXX";
  std::vector<char> path(name.begin(), name.end());
  path.push_back('\0');
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0)
    throw_error(SW_ERROR_IO, "cannot create a file carrier in directory '" + directory + "': " + describe_errno(errno));

  // The file leaves the directory at once: it lives as long as the carrier
  // holds it open, and a crash or a forgotten release leaves nothing on
  // disk. O_DIRECT reopens it through /proc/self/fd, which works unlinked.
  auto carrier = Ref<FileCarrier>::adopt(new FileCarrier(runtime, dtype, size, options));
  carrier->options_.directory = directory;
  OpenFile& file = *carrier->files_.emplace_back(std::make_unique<OpenFile>());
  file.path = path.data();
  file.fd = fd;
  carrier->owns_file_ = true;
  if (::unlink(path.data()) != 0)
    throw_error(SW_ERROR_IO,
                "cannot unlink the file carrier's scratch file '" + file.path + "': " + describe_errno(errno));
  // A sparse file reads as zeros without writing a byte.
  if (bytes && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
    throw_error(SW_ERROR_IO, "cannot size the file carrier's file '" + file.path + "' to " + std::to_string(bytes) +
                                 " bytes: " + describe_errno(errno));
  carrier->open_direct(file, O_RDWR);
  // A scratch file is sparse: it takes a known profile of its device but
  // never measures one.
  carrier->resolve_io(bytes, false);
  return carrier;
}

Ref<FileCarrier> FileCarrier::open(const Ref<Runtime>& runtime, sw_dtype_t dtype, const std::string& path,
                                   uint64_t byte_offset, size_t size, const FileCarrierOptions& options) {
  const size_t bytes = region_bytes(dtype, size);
  auto carrier = Ref<FileCarrier>::adopt(new FileCarrier(runtime, dtype, size, options));
  carrier->options_.directory.clear();
  carrier->read_only_ = true;
  carrier->base_offset_ = byte_offset;
  uint64_t file_bytes = 0;
  carrier->add_file(path, &file_bytes);
  if (byte_offset > file_bytes || bytes > file_bytes - byte_offset)
    value_error("the region [" + std::to_string(byte_offset) + ", " + std::to_string(byte_offset) + " + " +
                std::to_string(bytes) + ") passes the end of '" + path + "', which holds " +
                std::to_string(file_bytes) + " bytes");
  carrier->open_direct(*carrier->files_.front(), O_RDONLY);
  carrier->resolve_io(file_bytes, true);
  return carrier;
}

Ref<FileCarrier> FileCarrier::open_segments(const Ref<Runtime>& runtime, sw_dtype_t dtype, const std::string& path,
                                            const std::vector<FileSegment>& segments, const FileCarrierOptions& options) {
  return open_segments(runtime, dtype, std::vector<std::string>{path}, segments, options);
}

Ref<FileCarrier> FileCarrier::open_segments(const Ref<Runtime>& runtime, sw_dtype_t dtype,
                                            const std::vector<std::string>& paths,
                                            const std::vector<FileSegment>& segments,
                                            const FileCarrierOptions& options) {
  if (paths.empty()) value_error("file carrier: segments of no file");
  const std::string source = paths.size() == 1 ? "'" + paths.front() + "'" : "the files";
  size_t total = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].file >= paths.size())
      value_error("segment " + std::to_string(i) + " is of file " + std::to_string(segments[i].file) + ", but " +
                  std::to_string(paths.size()) + " paths were given");
    if (__builtin_add_overflow(total, segments[i].count, &total))
      value_error("file carrier: the segments of " + source + " hold more slots than a size_t counts");
    (void)region_bytes(dtype, segments[i].count);
  }
  (void)region_bytes(dtype, total);

  // Each file opened in turn: on a failure the carrier, and with it every
  // file opened so far, is released.
  auto carrier = Ref<FileCarrier>::adopt(new FileCarrier(runtime, dtype, total, options));
  carrier->options_.directory.clear();
  carrier->read_only_ = true;
  std::vector<uint64_t> file_bytes(paths.size());
  for (size_t f = 0; f < paths.size(); ++f) carrier->add_file(paths[f], &file_bytes[f]);
  size_t first = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const FileSegment& seg = segments[i];
    const uint64_t bytes = dtype_bytes(dtype, seg.count), size = file_bytes[seg.file];
    if (seg.offset > size || bytes > size - seg.offset)
      value_error("segment " + std::to_string(i) + ", [" + std::to_string(seg.offset) + ", " +
                  std::to_string(seg.offset) + " + " + std::to_string(bytes) + "), passes the end of '" +
                  paths[seg.file] + "', which holds " + std::to_string(size) + " bytes");
    if (!seg.count) continue;
    carrier->segments_.push_back({carrier->files_[seg.file].get(), seg.offset, first});
    first += seg.count;
  }
  for (const auto& file : carrier->files_) carrier->open_direct(*file, O_RDONLY);
  carrier->resolve_io(file_bytes.front(), true);
  return carrier;
}

Ref<Carrier> FileCarrier::create_empty_like() const { return create(runtime_ref(), dtype(), 0, options_); }

const FileCarrier::OpenFile& FileCarrier::add_file(const std::string& path, uint64_t* out_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error(SW_ERROR_IO, "cannot open '" + path + "': " + describe_errno(errno));
  OpenFile& file = *files_.emplace_back(std::make_unique<OpenFile>());
  file.path = path;
  file.fd = fd;
  *out_bytes = file_size_of(fd, path);
  return file;
}

void FileCarrier::open_direct(OpenFile& file, int flags) {
  if (!direct_io_) return;
  // Reopen the very file behind its fd (no race with a renamed path); fall
  // back to the path when /proc is not mounted.
  const std::string self = "/proc/self/fd/" + std::to_string(file.fd);
  int fd = -1;
  if (runtime().fault_fires(FaultKind::kDirectIo)) {
    errno = EINVAL;  // injected: as a file system without O_DIRECT
  } else {
    fd = ::open(self.c_str(), flags | O_DIRECT | O_CLOEXEC);
    if (fd < 0 && errno != EINVAL && !owns_file_) fd = ::open(file.path.c_str(), flags | O_DIRECT | O_CLOEXEC);
  }
  if (fd < 0) {
    // tmpfs and some network file systems refuse O_DIRECT: buffered I/O only.
    runtime().log(SW_LOG_DEBUG, "file carrier '" + file.path + "': O_DIRECT unavailable (" + describe_errno(errno) +
                                    "); using buffered I/O");
    return;
  }
  file.direct_fd = fd;
  file.direct_ok.store(true, std::memory_order_relaxed);
}

std::string FileCarrier::files_text() const {
  std::string text;
  for (size_t f = 0; f < files_.size(); ++f)
    text += (f == 0 ? "'" : f + 1 == files_.size() ? " and '" : ", '") + files_[f]->path + "'";
  return text;
}

void FileCarrier::close_file() noexcept {
  for (const auto& file : files_) {
    file->disable_direct();
    if (file->direct_fd >= 0) ::close(std::exchange(file->direct_fd, -1));
    if (file->fd < 0) continue;
    const int fd = std::exchange(file->fd, -1);
    // The last close of an unlinked scratch file drops its page cache, which
    // takes tens of milliseconds for a large file; dispose often runs on the
    // loop thread (a move's commit), so a worker does that close.
    if (owns_file_ && bytes_of(size()) >= kDeferredCloseBytes) {
      try {
        runtime().workers().submit([fd] { ::close(fd); });
        continue;
      } catch (...) {
        // No memory for the job: close here.
      }
    }
    ::close(fd);
  }
}

uint64_t FileCarrier::stored_bytes() const { return is_disposed() ? 0 : bytes_of(size()); }

void FileCarrier::allocate_storage(size_t size, bool) {
  const size_t bytes = region_bytes(dtype(), size);
  const OpenFile& file = *files_.front();
  if (::ftruncate(file.fd, static_cast<off_t>(bytes)) != 0)
    throw_error(SW_ERROR_IO, "cannot size the file carrier's file '" + file.path + "' to " + std::to_string(bytes) +
                                 " bytes: " + describe_errno(errno));
}

FileIoStats FileCarrier::io_stats() const {
  FileIoStats s;
  s.direct_bytes = direct_bytes_.load(std::memory_order_relaxed);
  s.bounce_bytes = bounce_bytes_.load(std::memory_order_relaxed);
  s.buffered_bytes = buffered_bytes_.load(std::memory_order_relaxed);
  s.direct_open = !files_.empty();
  for (const auto& file : files_) s.direct_open = s.direct_open && file->direct_usable();
  return s;
}

void FileCarrier::count_bytes(PieceMode mode, bool used_direct, size_t bytes) const {
  auto& counter = !used_direct ? buffered_bytes_ : mode == PieceMode::kBounce ? bounce_bytes_ : direct_bytes_;
  counter.fetch_add(bytes, std::memory_order_relaxed);
}

size_t FileCarrier::read_phase(size_t first) const {
  if (first >= size()) return 0;
  const Extent e = extents_of(first, static_cast<size_t>(dtype_block_elements(dtype()))).front();
  return e.file->direct_usable() ? static_cast<size_t>(e.file_offset % kDirectAlignment) : 0;
}

std::vector<FileCarrier::Extent> FileCarrier::extents_of(size_t first, size_t count) const {
  std::vector<Extent> out;
  if (!count) return out;
  if (segments_.empty()) {
    out.push_back({files_.front().get(), base_offset_ + bytes_of(first), 0, bytes_of(count)});
    return out;
  }
  const auto after = std::upper_bound(segments_.begin(), segments_.end(), first,
                                      [](size_t slot, const Segment& s) { return slot < s.first; });
  size_t i = static_cast<size_t>(after - segments_.begin()) - 1;
  size_t position = 0;
  while (count) {
    const Segment& seg = segments_[i];
    const size_t end = i + 1 < segments_.size() ? segments_[i + 1].first : size();
    const size_t n = std::min(count, end - first);
    out.push_back({seg.file, seg.offset + bytes_of(first - seg.first), position, bytes_of(n)});
    position += bytes_of(n);
    first += n;
    count -= n;
    ++i;
  }
  return out;
}

FileCarrier::Piece FileCarrier::next_piece(bool write, uint64_t file_offset, const std::byte* address,
                                           size_t remaining, Slack slack) const {
  if (!direct_io_) return {std::min(chunk_bytes_, remaining), PieceMode::kBuffered};
  // Reads that cannot go in place read the enclosing blocks into a bounce
  // buffer; writes that cannot are buffered.
  const PieceMode unaligned = write ? PieceMode::kBuffered : PieceMode::kBounce;
  if (write) slack = {false, false};
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  if (file_offset % kDirectAlignment == a % kDirectAlignment) {
    const size_t rem = static_cast<size_t>(file_offset % kDirectAlignment);
    if (rem) {
      // The buffer's unaligned start: one chunk from its enclosing block on,
      // padded, when the piece's other end is aligned or may spill too.
      const size_t n = std::min(remaining, chunk_bytes_ - rem);
      if (slack.head && (n < remaining || slack.tail || (rem + n) % kDirectAlignment == 0))
        return {n, PieceMode::kPadded};
      return {std::min<size_t>(remaining, kDirectAlignment - rem), unaligned};
    }
    // The buffer's unaligned end, within one chunk: one padded piece.
    if (slack.tail && remaining % kDirectAlignment && remaining <= chunk_bytes_) return {remaining, PieceMode::kPadded};
    const size_t aligned = std::min(chunk_bytes_, remaining) / kDirectAlignment * kDirectAlignment;
    if (aligned) return {aligned, PieceMode::kDirect};
    return {remaining, unaligned};
  }
  return {std::min(chunk_bytes_, remaining), unaligned};
}

size_t FileCarrier::piece_count(bool write, const std::vector<Extent>& extents, const std::byte* buffer) const {
  size_t count = 0;
  for (const Extent& e : extents)
    for (size_t position = 0; position < e.length; ++count)
      position += next_piece(write, e.file_offset + position, buffer + e.position + position, e.length - position).length;
  return count;
}

bool FileCarrier::direct_refused(const OpenFile& file) const {
  if (!runtime().fault_fires(FaultKind::kDirectIo)) return false;
  file.disable_direct();  // injected: O_DIRECT refused at transfer time
  return true;
}

void FileCarrier::io_failure(bool write, const OpenFile& file, uint64_t file_offset, int error_number) {
  throw_error(SW_ERROR_IO, std::string(write ? "file write" : "file read") + " of '" + file.path + "' at byte " +
                               std::to_string(file_offset) + " failed: " + describe_errno(error_number));
}

namespace {

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;

// An uninitialised buffer of `bytes` (a multiple of 4096) aligned to 4096,
// or null when memory runs out.
AlignedBuffer aligned_buffer(size_t bytes) {
  void* p = nullptr;
  if (::posix_memalign(&p, kDirectAlignment, bytes) != 0) return nullptr;
  return AlignedBuffer(static_cast<std::byte*>(p));
}

// A bounce buffer of a direct read: from the runtime's buffer pool
// when it is large enough to come 4096-aligned from there (its pages stay
// warm from one read to the next: fresh ones cost a page fault each inside
// the read), else from posix_memalign.
class Bounce {
 public:
  Bounce() = default;
  Bounce(const std::shared_ptr<BufferPool>& pool, size_t bytes) {
    if (BufferPool::alignment_for(bytes) % kDirectAlignment == 0) {
      try {
        pooled_ = HostBuffer(pool, bytes);
      } catch (...) {
        return;  // null: out of memory
      }
      data_ = pooled_.data();
    } else {
      small_ = aligned_buffer(bytes);
      data_ = small_.get();
    }
  }
  std::byte* get() const { return data_; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset() {
    pooled_.reset();
    small_.reset();
    data_ = nullptr;
  }

 private:
  HostBuffer pooled_;
  AlignedBuffer small_;
  std::byte* data_ = nullptr;
};

uint64_t align_down(uint64_t v) { return v / kDirectAlignment * kDirectAlignment; }
uint64_t align_up(uint64_t v) { return (v + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment; }

}  // namespace

ssize_t FileCarrier::bounce_read_sync(const OpenFile& file, uint64_t file_offset, std::byte* dst, size_t length) const {
  const uint64_t start = align_down(file_offset);
  const size_t span = static_cast<size_t>(align_up(file_offset + length) - start);
  Bounce bounce(runtime().pool(), span);
  if (!bounce) throw std::bad_alloc();
  const ssize_t n = ::pread(file.direct_fd, bounce.get(), span, static_cast<off_t>(start));
  if (n < 0) return -errno;
  const size_t skip = static_cast<size_t>(file_offset - start);
  const size_t got = static_cast<size_t>(n) > skip ? std::min(static_cast<size_t>(n) - skip, length) : 0;
  std::memcpy(dst, bounce.get() + skip, got);
  return static_cast<ssize_t>(got);
}

void FileCarrier::transfer_sync(bool write, const std::vector<Extent>& extents, std::byte* buffer) const {
  Runtime& rt = runtime();
  const FaultKind fault = write ? FaultKind::kWrite : FaultKind::kRead;
  const char* what = write ? "file write" : "file read";
  // Every write request is fault-checked before the first byte is written, so
  // an injected failure leaves the file as it was.
  if (write)
    for (size_t n = piece_count(true, extents, buffer); n; --n) rt.check_fault(fault, what);
  for (const Extent& e : extents) {
    const OpenFile& file = *e.file;
    for (size_t position = 0; position < e.length;) {
      const Piece piece = next_piece(write, e.file_offset + position, buffer + e.position + position, e.length - position);
      if (!write) rt.check_fault(fault, what);
      PieceMode mode = piece.mode;
      for (size_t done = 0; done < piece.length;) {
        const uint64_t offset = e.file_offset + position + done;
        std::byte* address = buffer + e.position + position + done;
        const size_t length = piece.length - done;
        if (mode != PieceMode::kBuffered && file.direct_usable() && direct_refused(file)) mode = PieceMode::kBuffered;
        if (mode == PieceMode::kBounce && file.direct_usable()) {
          const ssize_t n = bounce_read_sync(file, offset, address, length);
          if (n < 0) {
            if (-n == EINTR) continue;
            if (-n == EINVAL) {
              file.disable_direct();  // O_DIRECT opened but refused at transfer time
              mode = PieceMode::kBuffered;
              continue;
            }
            io_failure(false, file, offset, static_cast<int>(-n));
          }
          if (n == 0)
            throw_error(SW_ERROR_IO, "file read of '" + file.path + "' at byte " + std::to_string(offset) +
                                         " failed: unexpected end of file");
          count_bytes(PieceMode::kBounce, true, static_cast<size_t>(n));
          done += static_cast<size_t>(n);
          mode = PieceMode::kBuffered;  // a short read's remainder goes through the page cache
          continue;
        }
        const int fd = file.fd_for(mode == PieceMode::kDirect);
        const ssize_t n = write ? ::pwrite(fd, address, length, static_cast<off_t>(offset))
                                : ::pread(fd, address, length, static_cast<off_t>(offset));
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EINVAL && fd != file.fd) {
            file.disable_direct();  // O_DIRECT opened but refused at transfer time
            continue;
          }
          io_failure(write, file, offset, errno);
        }
        if (n == 0) {
          if (!write)
            throw_error(SW_ERROR_IO, "file read of '" + file.path + "' at byte " + std::to_string(offset) +
                                         " failed: unexpected end of file");
          io_failure(write, file, offset, EIO);
        }
        count_bytes(mode, fd != file.fd, static_cast<size_t>(n));
        done += static_cast<size_t>(n);
        mode = PieceMode::kBuffered;  // a short transfer's remainder is no longer aligned
      }
      position += piece.length;
    }
  }
}

void FileCarrier::read_slots(size_t first, size_t count, void* dst) const {
  transfer_sync(false, extents_of(first, count), static_cast<std::byte*>(dst));
}

void FileCarrier::write_slots(size_t first, size_t count, const void* src) {
  if (read_only_) state_error("write: the File carrier over " + files_text() + " is read-only");
  transfer_sync(true, extents_of(first, count), const_cast<std::byte*>(static_cast<const std::byte*>(src)));
}

// ---- asynchronous transfers ---------------------------------------------

// One asynchronous transfer: keeps up to requests_in_flight uv_fs requests
// outstanding, each holding one of the runtime's file request slots
// (IoQueue: demand before prefetch), and calls `done` once, after the last
// one returned. Lives on the loop thread only; each request holds a
// reference to it.
class FileCarrier::Transfer : public std::enable_shared_from_this<FileCarrier::Transfer> {
 public:
  Transfer(Ref<FileCarrier> carrier, bool write, std::vector<Extent> extents, std::byte* buffer, IoDone done,
           IoPriority priority, bool whole_blocks)
      : carrier_(std::move(carrier)), write_(write), extents_(std::move(extents)), buffer_(buffer), done_(std::move(done)),
        priority_(priority), whole_blocks_(whole_blocks && !write) {
    for (const Extent& e : extents_) buffer_end_ = std::max(buffer_end_, e.position + e.length);
  }

  void start();

 private:
  struct Request {
    uv_fs_t fs;      // through libuv's thread pool
    FileOp ring_op;  // or through the loop's io_uring (O_DIRECT only)
    std::shared_ptr<Transfer> transfer;
    const OpenFile* file;  // of the piece
    uint64_t file_offset;  // of the piece
    size_t position;       // of the piece within the host buffer
    size_t length;
    size_t done = 0;
    PieceMode mode;
    bool used_direct = false;
    bool blocks = false;        // reading the enclosing aligned blocks (a bounce or padded piece)
    Bounce bounce;              // a bounce read in flight: those blocks, copied out at completion
  };

  void issue() noexcept;
  void queue_for_slot() noexcept;
  bool submit(Request* request) noexcept;
  void retire(Request* request) noexcept;
  void finish_if_idle() noexcept;
  void fail(Status status) noexcept {
    if (error_.ok()) error_ = std::move(status);
  }
  Status io_status(const OpenFile& file, uint64_t offset, int uv_error) const;
  Status end_of_file(const OpenFile& file, uint64_t offset) const {
    return Status::make(SW_ERROR_IO, "file read of '" + file.path + "' at byte " + std::to_string(offset) +
                                         " failed: unexpected end of file");
  }
  static void on_complete(uv_fs_t* fs);
  static void on_ring_complete(FileOp* op, ssize_t result);
  // A request's read or write returned `result` (bytes, or a negative errno).
  static void complete(Request* request, ssize_t result);

  Ref<FileCarrier> carrier_;
  bool write_;
  std::vector<Extent> extents_;
  std::byte* buffer_;
  IoDone done_;
  IoPriority priority_;
  bool whole_blocks_;      // the buffer's enclosing blocks are scratch (read_async)
  size_t buffer_end_ = 0;  // bytes of the host buffer the extents cover
  IoQueue* slots_ = nullptr;  // the carrier's request slots, taken at start()
  uint64_t ticket_ = 0;    // its place in the IoQueue's order
  bool queued_ = false;    // waiting in the IoQueue for a slot
  size_t extent_ = 0;      // the next piece to issue: extent extent_, position_ bytes in
  size_t position_ = 0;
  uint32_t in_flight_ = 0;
  Status error_;           // the first error wins
  bool finished_ = false;
};

void FileCarrier::Transfer::start() {
  slots_ = &carrier_->io_queue();
  ticket_ = slots_->next_ticket();
  if (write_) {
    // As in the synchronous path: fault-check every request before writing.
    fail(capture([&] {
      for (size_t n = carrier_->piece_count(true, extents_, buffer_); n; --n)
        carrier_->runtime().check_fault(FaultKind::kWrite, "file write");
    }));
  }
  issue();
  if (in_flight_ == 0 && !queued_) {
    // Nothing was issued (an empty transfer or an immediate failure): `done`
    // still runs later on the loop thread, never inside the caller's call.
    finished_ = true;
    auto finish = [done = std::move(done_), status = std::move(error_)]() mutable { done(std::move(status)); };
    if (!carrier_->runtime().loop().post(finish)) finish();
  }
}

Status FileCarrier::Transfer::io_status(const OpenFile& file, uint64_t offset, int uv_error) const {
  return Status::make(SW_ERROR_IO, std::string(write_ ? "file write" : "file read") + " of '" + file.path +
                                       "' at byte " + std::to_string(offset) + " failed: " + describe_errno(-uv_error));
}

void FileCarrier::Transfer::issue() noexcept {
  Runtime& rt = carrier_->runtime();
  IoQueue& slots = *slots_;
  while (error_.ok() && in_flight_ < carrier_->requests_in_flight_ && extent_ < extents_.size()) {
    if (rt.is_shut_down()) {
      fail(Status::make(SW_ERROR_CANCELLED, std::string(write_ ? "file write" : "file read") +
                                                ": the runtime has been shut down"));
      break;
    }
    if (!slots.try_acquire(priority_, ticket_)) {
      queue_for_slot();
      break;
    }
    Request* request = nullptr;
    fail(capture([&] {
      if (!write_) rt.check_fault(FaultKind::kRead, "file read");
      const Extent& e = extents_[extent_];
      const size_t at = e.position + position_, left = e.length - position_;
      const Slack slack{whole_blocks_ && at == 0, whole_blocks_ && at + left == buffer_end_};
      const Piece piece = carrier_->next_piece(write_, e.file_offset + position_, buffer_ + at, left, slack);
      request = new Request{};
      request->transfer = shared_from_this();
      request->file = e.file;
      request->file_offset = e.file_offset + position_;
      request->position = e.position + position_;
      request->length = piece.length;
      request->mode = piece.mode;
      position_ += piece.length;
      if (position_ == e.length) {
        ++extent_;
        position_ = 0;
      }
    }));
    if (!request) {
      slots.release(priority_);
      break;
    }
    ++in_flight_;
    if (!submit(request)) {
      retire(request);
      break;
    }
  }
}

void FileCarrier::Transfer::queue_for_slot() noexcept {
  if (queued_) return;
  queued_ = true;
  slots_->wait(priority_, ticket_, [self = shared_from_this()] {
    self->queued_ = false;
    self->issue();
    self->finish_if_idle();
  });
}

bool FileCarrier::Transfer::submit(Request* request) noexcept {
  const uint64_t offset = request->file_offset + request->done;
  const size_t length = request->length - request->done;
  uv_buf_t buf;  // uv_buf_init takes an unsigned int length
  int fd;
  uint64_t at = offset;
  const OpenFile& file = *request->file;
  request->bounce.reset();
  if (request->mode != PieceMode::kBuffered && file.direct_usable() && carrier_->direct_refused(file))
    request->mode = PieceMode::kBuffered;
  request->blocks = (request->mode == PieceMode::kBounce || request->mode == PieceMode::kPadded) &&
                    file.direct_usable();
  if (request->blocks) {
    // The enclosing blocks: into a bounce buffer, or (padded) where they lie
    // in the host buffer.
    at = align_down(offset);
    const size_t span = static_cast<size_t>(align_up(offset + length) - at);
    if (request->mode == PieceMode::kBounce) {
      request->bounce = Bounce(carrier_->runtime().pool(), span);
      if (!request->bounce) {
        fail(Status::make(SW_ERROR_OUT_OF_MEMORY, "out of memory"));
        return false;
      }
      buf.base = reinterpret_cast<char*>(request->bounce.get());
    } else {
      buf.base = reinterpret_cast<char*>(buffer_ + request->position + request->done - (offset - at));
    }
    buf.len = span;
    fd = file.direct_fd;
  } else {
    fd = file.fd_for(request->mode == PieceMode::kDirect);
    buf.base = reinterpret_cast<char*>(buffer_ + request->position + request->done);
    buf.len = length;
  }
  request->used_direct = fd != file.fd;
  Loop& loop = carrier_->runtime().loop();
  if (request->used_direct && loop.has_ring()) {
    // O_DIRECT: the device is the bound, and the ring reaches it from this
    // thread. Buffered requests stay on the thread pool, whose threads copy
    // from the page cache in parallel.
    request->ring_op.complete = &on_ring_complete;
    request->ring_op.data = request;
    const int rc = loop.submit_file_op(write_, fd, buf.base, buf.len, at, &request->ring_op);
    if (rc < 0) {
      fail(io_status(file, offset, rc));
      return false;
    }
    return true;
  }
  request->fs.data = request;
  const int rc = write_ ? uv_fs_write(loop.uv(), &request->fs, fd, &buf, 1, static_cast<int64_t>(at), &on_complete)
                        : uv_fs_read(loop.uv(), &request->fs, fd, &buf, 1, static_cast<int64_t>(at), &on_complete);
  if (rc < 0) {
    uv_fs_req_cleanup(&request->fs);
    fail(io_status(file, offset, rc));
    return false;
  }
  return true;
}

void FileCarrier::Transfer::retire(Request* request) noexcept {
  delete request;
  --in_flight_;
  // With pieces left, the transfer queues in its place before it returns the
  // slot: the slot goes to the earliest transfer waiting, this one included,
  // not to whichever waited in line while its pieces ran.
  if (error_.ok() && extent_ < extents_.size()) queue_for_slot();
  slots_->release(priority_);
}

void FileCarrier::Transfer::on_complete(uv_fs_t* fs) {
  auto* request = static_cast<Request*>(fs->data);
  const ssize_t result = fs->result;
  uv_fs_req_cleanup(fs);
  complete(request, result);
}

void FileCarrier::Transfer::on_ring_complete(FileOp* op, ssize_t result) {
  complete(static_cast<Request*>(op->data), result);
}

void FileCarrier::Transfer::complete(Request* request, ssize_t result) {
  const std::shared_ptr<Transfer> self = request->transfer;  // outlives the request
  const uint64_t offset = request->file_offset + request->done;
  if (result < 0) {
    if (result == UV_EINVAL && request->used_direct) {
      // O_DIRECT opened but refused at transfer time: buffered from now on.
      request->file->disable_direct();
      request->mode = PieceMode::kBuffered;
      if (self->submit(request)) return;
    } else {
      self->fail(self->io_status(*request->file, offset, static_cast<int>(result)));
    }
  } else {
    size_t got = static_cast<size_t>(result);
    if (request->blocks) {
      // The piece's bytes of the enclosing blocks (copied out of a bounce
      // buffer; a padded piece's are in place already).
      const size_t skip = static_cast<size_t>(offset - align_down(offset));
      got = got > skip ? std::min(got - skip, request->length - request->done) : 0;
      if (request->bounce) {
        std::memcpy(self->buffer_ + request->position + request->done, request->bounce.get() + skip, got);
        request->bounce.reset();
      }
    }
    if (got == 0) {
      self->fail(self->write_ ? self->io_status(*request->file, offset, UV_EIO)
                              : self->end_of_file(*request->file, offset));
    } else {
      self->carrier_->count_bytes(request->mode, request->used_direct, got);
      request->done += got;
      if (request->done < request->length && self->error_.ok()) {
        request->mode = PieceMode::kBuffered;  // the remainder of a short transfer is unaligned
        if (self->submit(request)) return;
      }
    }
  }
  self->retire(request);
  self->issue();
  self->finish_if_idle();
}

void FileCarrier::Transfer::finish_if_idle() noexcept {
  // Waiting for a slot with pieces left: the wait's turn issues them.
  if (finished_ || in_flight_ > 0 || (queued_ && error_.ok())) return;
  finished_ = true;
  IoDone done = std::move(done_);
  done(std::move(error_));
}

void FileCarrier::transfer_async(bool write, std::vector<Extent> extents, std::byte* buffer, IoDone done,
                                 IoPriority priority, bool whole_blocks) {
  Ref<FileCarrier> self(this);
  std::make_shared<Transfer>(self, write, std::move(extents), buffer, std::move(done), priority, whole_blocks)->start();
}

void FileCarrier::issue_read(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority priority,
                             bool whole_blocks) {
  transfer_async(false, extents_of(first, count), dst, std::move(done), priority, whole_blocks);
}

void FileCarrier::issue_write(size_t first, size_t count, const std::byte* src, IoDone done) {
  if (read_only_) {
    auto refuse = [done = std::move(done), files = files_text()]() mutable {
      done(Status::make(SW_ERROR_STATE, "write: the File carrier over " + files + " is read-only"));
    };
    if (!runtime().loop().post(refuse)) refuse();
    return;
  }
  transfer_async(true, extents_of(first, count), const_cast<std::byte*>(src), std::move(done));
}

}  // namespace sw
