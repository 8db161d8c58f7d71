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
  size_t bytes;
  if (__builtin_mul_overflow(size, dtype_size(dtype), &bytes) || bytes > static_cast<size_t>(INT64_MAX))
    value_error("file carrier: " + std::to_string(size) + " slots of " + dtype_name(dtype) +
                " overflow a file offset");
  return bytes;
}

std::string default_directory() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir && *tmpdir ? std::string(tmpdir) : std::string("/tmp");
}

}  // namespace

FileCarrier::FileCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, const FileCarrierOptions& options)
    : Carrier(std::move(runtime), SW_CARRIER_FILE, dtype, size),
      options_(options),
      direct_io_(options.direct_io),
      chunk_bytes_(std::min(std::max<size_t>(options.chunk_bytes, 1), kMaxChunkBytes)),
      requests_in_flight_(std::max<uint32_t>(options.requests_in_flight, 1)) {
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
  carrier->path_ = path.data();
  carrier->fd_ = fd;
  carrier->owns_file_ = true;
  if (::unlink(path.data()) != 0)
    throw_error(SW_ERROR_IO, "cannot unlink the file carrier's scratch file '" + carrier->path_ +
                                 "': " + describe_errno(errno));
  // A sparse file reads as zeros without writing a byte.
  if (bytes && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
    throw_error(SW_ERROR_IO, "cannot size the file carrier's file '" + carrier->path_ + "' to " +
                                 std::to_string(bytes) + " bytes: " + describe_errno(errno));
  carrier->open_direct(O_RDWR);
  return carrier;
}

Ref<FileCarrier> FileCarrier::open(const Ref<Runtime>& runtime, sw_dtype_t dtype, const std::string& path,
                                   uint64_t byte_offset, size_t size, const FileCarrierOptions& options) {
  const size_t bytes = region_bytes(dtype, size);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error(SW_ERROR_IO, "cannot open '" + path + "': " + describe_errno(errno));

  auto carrier = Ref<FileCarrier>::adopt(new FileCarrier(runtime, dtype, size, options));
  carrier->options_.directory.clear();
  carrier->path_ = path;
  carrier->fd_ = fd;
  carrier->read_only_ = true;
  carrier->base_offset_ = byte_offset;
  struct stat st;
  if (::fstat(fd, &st) != 0) throw_error(SW_ERROR_IO, "cannot stat '" + path + "': " + describe_errno(errno));
  if (S_ISDIR(st.st_mode)) throw_error(SW_ERROR_IO, "cannot open '" + path + "': " + describe_errno(EISDIR));
  // lseek rather than st_size so that block devices report their size too.
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) throw_error(SW_ERROR_IO, "cannot find the end of '" + path + "': " + describe_errno(errno));
  const uint64_t file_bytes = static_cast<uint64_t>(end);
  if (byte_offset > file_bytes || bytes > file_bytes - byte_offset)
    value_error("the region [" + std::to_string(byte_offset) + ", " + std::to_string(byte_offset) + " + " +
                std::to_string(bytes) + ") passes the end of '" + path + "', which holds " +
                std::to_string(file_bytes) + " bytes");
  carrier->open_direct(O_RDONLY);
  return carrier;
}

Ref<Carrier> FileCarrier::create_empty_like() const { return create(runtime_ref(), dtype(), 0, options_); }

void FileCarrier::open_direct(int flags) {
  if (!direct_io_) return;
  // Reopen the very file behind fd_ (no race with a renamed path); fall back
  // to the path when /proc is not mounted.
  const std::string self = "/proc/self/fd/" + std::to_string(fd_);
  int fd = ::open(self.c_str(), flags | O_DIRECT | O_CLOEXEC);
  if (fd < 0 && errno != EINVAL && !owns_file_) fd = ::open(path_.c_str(), flags | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    // tmpfs and some network file systems refuse O_DIRECT: buffered I/O only.
    runtime().log(SW_LOG_DEBUG, "file carrier '" + path_ + "': O_DIRECT unavailable (" + describe_errno(errno) +
                                    "); using buffered I/O");
    return;
  }
  direct_fd_ = fd;
  direct_ok_.store(true, std::memory_order_relaxed);
}

void FileCarrier::close_file() noexcept {
  direct_ok_.store(false, std::memory_order_relaxed);
  if (direct_fd_ >= 0) {
    ::close(direct_fd_);
    direct_fd_ = -1;
  }
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  if (owns_file_) {
    // The last close of an unlinked file drops its page cache, which takes
    // tens of milliseconds for a large file; dispose often runs on the loop
    // thread (a move's commit), so a worker does that close.
    if (static_cast<uint64_t>(size()) * element_size() >= kDeferredCloseBytes) {
      try {
        runtime().workers().submit([fd] { ::close(fd); });
        return;
      } catch (...) {
        // No memory for the job: close here.
      }
    }
  }
  ::close(fd);
}

uint64_t FileCarrier::stored_bytes() const {
  return is_disposed() ? 0 : static_cast<uint64_t>(size()) * element_size();
}

void FileCarrier::allocate_storage(size_t size, bool) {
  const size_t bytes = region_bytes(dtype(), size);
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0)
    throw_error(SW_ERROR_IO, "cannot size the file carrier's file '" + path_ + "' to " + std::to_string(bytes) +
                                 " bytes: " + describe_errno(errno));
}

FileCarrier::Piece FileCarrier::next_piece(uint64_t file_offset, const std::byte* buffer, size_t position,
                                           size_t total) const {
  const size_t remaining = total - position;
  if (direct_io_) {
    // The plan depends only on the addresses, not on whether O_DIRECT turned
    // out to work, so that a transfer's request count is fixed up front.
    const uint64_t offset = file_offset + position;
    const uintptr_t address = reinterpret_cast<uintptr_t>(buffer + position);
    if (offset % kDirectAlignment == address % kDirectAlignment) {
      if (offset % kDirectAlignment)
        return {std::min<size_t>(remaining, kDirectAlignment - offset % kDirectAlignment), false};
      const size_t aligned = std::min(chunk_bytes_, remaining) / kDirectAlignment * kDirectAlignment;
      if (aligned) return {aligned, true};
      return {remaining, false};
    }
  }
  return {std::min(chunk_bytes_, remaining), false};
}

size_t FileCarrier::piece_count(uint64_t file_offset, const std::byte* buffer, size_t total) const {
  size_t count = 0;
  for (size_t position = 0; position < total; ++count)
    position += next_piece(file_offset, buffer, position, total).length;
  return count;
}

int FileCarrier::fd_for(bool direct) const {
  return direct && direct_fd_ >= 0 && direct_ok_.load(std::memory_order_relaxed) ? direct_fd_ : fd_;
}

void FileCarrier::io_failure(bool write, uint64_t file_offset, int error_number) const {
  throw_error(SW_ERROR_IO, std::string(write ? "file write" : "file read") + " of '" + path_ + "' at byte " +
                               std::to_string(file_offset) + " failed: " + describe_errno(error_number));
}

void FileCarrier::transfer_sync(bool write, uint64_t file_offset, std::byte* buffer, size_t total) const {
  Runtime& rt = runtime();
  const FaultKind fault = write ? FaultKind::kWrite : FaultKind::kRead;
  const char* what = write ? "file write" : "file read";
  // Every write request is fault-checked before the first byte is written, so
  // an injected failure leaves the file as it was.
  if (write)
    for (size_t n = piece_count(file_offset, buffer, total); n; --n) rt.check_fault(fault, what);
  for (size_t position = 0; position < total;) {
    const Piece piece = next_piece(file_offset, buffer, position, total);
    if (!write) rt.check_fault(fault, what);
    bool direct = piece.direct;
    for (size_t done = 0; done < piece.length;) {
      const int fd = fd_for(direct);
      const uint64_t offset = file_offset + position + done;
      std::byte* address = buffer + position + done;
      const size_t length = piece.length - done;
      const ssize_t n = write ? ::pwrite(fd, address, length, static_cast<off_t>(offset))
                              : ::pread(fd, address, length, static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EINVAL && fd != fd_) {
          disable_direct();  // O_DIRECT opened but refused at transfer time
          continue;
        }
        io_failure(write, offset, errno);
      }
      if (n == 0) {
        if (!write)
          throw_error(SW_ERROR_IO, "file read of '" + path_ + "' at byte " + std::to_string(offset) +
                                       " failed: unexpected end of file");
        io_failure(write, offset, EIO);
      }
      done += static_cast<size_t>(n);
      direct = false;  // a short transfer's remainder is no longer aligned
    }
    position += piece.length;
  }
}

void FileCarrier::read_slots(size_t first, size_t count, void* dst) const {
  transfer_sync(false, byte_offset_of(first), static_cast<std::byte*>(dst), count * element_size());
}

void FileCarrier::write_slots(size_t first, size_t count, const void* src) {
  if (read_only_) state_error("write: the File carrier over '" + path_ + "' is read-only");
  transfer_sync(true, byte_offset_of(first), const_cast<std::byte*>(static_cast<const std::byte*>(src)),
                count * element_size());
}

// ---- asynchronous transfers ---------------------------------------------

// One asynchronous transfer: keeps up to requests_in_flight uv_fs requests
// outstanding and calls `done` once, after the last one returned. Lives on
// the loop thread only; each request holds a reference to it.
class FileCarrier::Transfer : public std::enable_shared_from_this<FileCarrier::Transfer> {
 public:
  Transfer(Ref<FileCarrier> carrier, bool write, uint64_t file_offset, std::byte* buffer, size_t total, IoDone done)
      : carrier_(std::move(carrier)),
        write_(write),
        file_offset_(file_offset),
        buffer_(buffer),
        total_(total),
        done_(std::move(done)) {}

  void start();

 private:
  struct Request {
    uv_fs_t fs;
    std::shared_ptr<Transfer> transfer;
    size_t position;  // of the piece within the transfer
    size_t length;
    size_t done = 0;
    bool direct;
    bool used_direct = false;
  };

  void issue() noexcept;
  bool submit(Request* request) noexcept;
  void retire(Request* request) noexcept;
  void finish_if_idle() noexcept;
  void fail(Status status) noexcept {
    if (error_.ok()) error_ = std::move(status);
  }
  Status io_status(uint64_t offset, int uv_error) const;
  static void on_complete(uv_fs_t* fs);

  Ref<FileCarrier> carrier_;
  bool write_;
  uint64_t file_offset_;
  std::byte* buffer_;
  size_t total_;
  IoDone done_;
  size_t next_ = 0;        // transfer position of the next piece to issue
  uint32_t in_flight_ = 0;
  Status error_;           // the first error wins
  bool finished_ = false;
};

void FileCarrier::Transfer::start() {
  if (write_) {
    // As in the synchronous path: fault-check every request before writing.
    fail(capture([&] {
      for (size_t n = carrier_->piece_count(file_offset_, buffer_, total_); n; --n)
        carrier_->runtime().check_fault(FaultKind::kWrite, "file write");
    }));
  }
  issue();
  if (in_flight_ == 0) {
    // Nothing was issued (an empty transfer or an immediate failure): `done`
    // still runs later on the loop thread, never inside the caller's call.
    finished_ = true;
    auto finish = [done = std::move(done_), status = std::move(error_)]() mutable { done(std::move(status)); };
    if (!carrier_->runtime().loop().post(finish)) finish();
  }
}

Status FileCarrier::Transfer::io_status(uint64_t offset, int uv_error) const {
  return Status::make(SW_ERROR_IO, std::string(write_ ? "file write" : "file read") + " of '" + carrier_->path_ +
                                       "' at byte " + std::to_string(offset) + " failed: " + describe_errno(-uv_error));
}

void FileCarrier::Transfer::issue() noexcept {
  Runtime& rt = carrier_->runtime();
  while (error_.ok() && in_flight_ < carrier_->requests_in_flight_ && next_ < total_) {
    if (rt.is_shut_down()) {
      fail(Status::make(SW_ERROR_CANCELLED, std::string(write_ ? "file write" : "file read") +
                                                ": the runtime has been shut down"));
      break;
    }
    Request* request = nullptr;
    fail(capture([&] {
      if (!write_) rt.check_fault(FaultKind::kRead, "file read");
      const Piece piece = carrier_->next_piece(file_offset_, buffer_, next_, total_);
      request = new Request{};
      request->transfer = shared_from_this();
      request->position = next_;
      request->length = piece.length;
      request->direct = piece.direct;
      next_ += piece.length;
    }));
    if (!request) break;
    ++in_flight_;
    if (!submit(request)) {
      retire(request);
      break;
    }
  }
}

bool FileCarrier::Transfer::submit(Request* request) noexcept {
  const int fd = carrier_->fd_for(request->direct);
  request->used_direct = fd != carrier_->fd_;
  const uint64_t offset = file_offset_ + request->position + request->done;
  uv_buf_t buf;  // uv_buf_init takes an unsigned int length
  buf.base = reinterpret_cast<char*>(buffer_ + request->position + request->done);
  buf.len = request->length - request->done;
  request->fs.data = request;
  uv_loop_t* loop = carrier_->runtime().loop().uv();
  const int rc = write_ ? uv_fs_write(loop, &request->fs, fd, &buf, 1, static_cast<int64_t>(offset), &on_complete)
                        : uv_fs_read(loop, &request->fs, fd, &buf, 1, static_cast<int64_t>(offset), &on_complete);
  if (rc < 0) {
    uv_fs_req_cleanup(&request->fs);
    fail(io_status(offset, rc));
    return false;
  }
  return true;
}

void FileCarrier::Transfer::retire(Request* request) noexcept {
  delete request;
  --in_flight_;
}

void FileCarrier::Transfer::on_complete(uv_fs_t* fs) {
  auto* request = static_cast<Request*>(fs->data);
  const std::shared_ptr<Transfer> self = request->transfer;  // outlives the request
  const ssize_t result = fs->result;
  uv_fs_req_cleanup(fs);
  const uint64_t offset = self->file_offset_ + request->position + request->done;
  if (result < 0) {
    if (result == UV_EINVAL && request->used_direct) {
      // O_DIRECT opened but refused at transfer time: buffered from now on.
      self->carrier_->disable_direct();
      request->direct = false;
      if (self->submit(request)) return;
    } else {
      self->fail(self->io_status(offset, static_cast<int>(result)));
    }
  } else if (result == 0) {
    self->fail(self->write_ ? self->io_status(offset, UV_EIO)
                            : Status::make(SW_ERROR_IO, "file read of '" + self->carrier_->path_ + "' at byte " +
                                                            std::to_string(offset) + " failed: unexpected end of file"));
  } else {
    request->done += static_cast<size_t>(result);
    if (request->done < request->length && self->error_.ok()) {
      request->direct = false;  // the remainder of a short transfer is unaligned
      if (self->submit(request)) return;
    }
  }
  self->retire(request);
  self->issue();
  self->finish_if_idle();
}

void FileCarrier::Transfer::finish_if_idle() noexcept {
  if (finished_ || in_flight_ > 0) return;
  finished_ = true;
  IoDone done = std::move(done_);
  done(std::move(error_));
}

void FileCarrier::transfer_async(bool write, uint64_t file_offset, std::byte* buffer, size_t total, IoDone done) {
  Ref<FileCarrier> self(this);
  std::make_shared<Transfer>(self, write, file_offset, buffer, total, std::move(done))->start();
}

void FileCarrier::issue_read(size_t first, size_t count, std::byte* dst, IoDone done) {
  transfer_async(false, byte_offset_of(first), dst, count * element_size(), std::move(done));
}

void FileCarrier::issue_write(size_t first, size_t count, const std::byte* src, IoDone done) {
  if (read_only_) {
    auto refuse = [done = std::move(done), path = path_]() mutable {
      done(Status::make(SW_ERROR_STATE, "write: the File carrier over '" + path + "' is read-only"));
    };
    if (!runtime().loop().post(refuse)) refuse();
    return;
  }
  transfer_async(true, byte_offset_of(first), const_cast<std::byte*>(src), count * element_size(), std::move(done));
}

}  // namespace sw
