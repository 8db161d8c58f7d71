// The file carrier: a secondary tier whose slots live in a file. Either a new
// scratch file the carrier owns (zero-filled, sparse, removed on dispose), or
// a read-only window on an existing file the user owns (a weights file).
//
// Transfers are positional (pread/pwrite, uv_fs_read/uv_fs_write with an
// offset), so several threads may read at once without a shared file offset.
// Asynchronous transfers are split into chunk_bytes requests with
// requests_in_flight of them outstanding on the runtime's libuv loop: the page
// cache only reaches memcpy speed with several reads in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/carrier.hpp"

namespace sw {

struct FileCarrierOptions {
  std::string directory;  // new files only; empty: $TMPDIR or /tmp
  bool direct_io = false;
  size_t chunk_bytes = size_t{4} << 20;
  uint32_t requests_in_flight = 4;
};

class FileCarrier final : public Carrier {
 public:
  // A zero-filled carrier in a new file; IO naming the directory on failure.
  static Ref<FileCarrier> create(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size,
                                 const FileCarrierOptions& options);
  // A read-only carrier over [byte_offset, byte_offset + size * dtype size) of
  // `path`. IO naming the path if it cannot be opened, VALUE if the region
  // passes the end of the file.
  static Ref<FileCarrier> open(const Ref<Runtime>& runtime, sw_dtype_t dtype, const std::string& path,
                               uint64_t byte_offset, size_t size, const FileCarrierOptions& options);
  ~FileCarrier() override;

  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;

  // A new empty scratch carrier with the same settings, in the same
  // directory (the default one for a read-only carrier: the user's file's
  // directory may not be writable).
  Ref<Carrier> create_empty_like() const override;

  bool is_read_only() const override { return read_only_; }
  uint64_t stored_bytes() const override;
  const std::string& path() const { return path_; }

 protected:
  void issue_read(size_t first, size_t count, std::byte* dst, IoDone done) override;
  void issue_write(size_t first, size_t count, const std::byte* src, IoDone done) override;
  void dispose_storage() override { close_file(); }
  void allocate_storage(size_t size, bool zero_fill) override;

 private:
  class Transfer;

  // One piece of a transfer: `length` bytes at transfer position `position`,
  // through the O_DIRECT descriptor when `direct`.
  struct Piece {
    size_t length;
    bool direct;
  };

  FileCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, const FileCarrierOptions& options);
  void open_direct(int flags);
  void close_file() noexcept;
  // The next piece of a transfer of `total` bytes starting at file offset
  // `file_offset` and host address `buffer`, `position` bytes in. Pieces whose
  // offset, length and address are all 4096-aligned may use O_DIRECT.
  Piece next_piece(uint64_t file_offset, const std::byte* buffer, size_t position, size_t total) const;
  size_t piece_count(uint64_t file_offset, const std::byte* buffer, size_t total) const;
  uint64_t byte_offset_of(size_t slot) const { return base_offset_ + static_cast<uint64_t>(slot) * element_size(); }
  int fd_for(bool direct) const;
  // O_DIRECT was refused at transfer time (EINVAL): use the normal fd only.
  void disable_direct() const { direct_ok_.store(false, std::memory_order_relaxed); }
  void transfer_sync(bool write, uint64_t file_offset, std::byte* buffer, size_t total) const;
  void transfer_async(bool write, uint64_t file_offset, std::byte* buffer, size_t total, IoDone done);
  [[noreturn]] void io_failure(bool write, uint64_t file_offset, int error_number) const;

  FileCarrierOptions options_;
  std::string path_;
  int fd_ = -1;
  int direct_fd_ = -1;
  mutable std::atomic<bool> direct_ok_{false};
  uint64_t base_offset_ = 0;
  bool read_only_ = false;
  bool owns_file_ = false;  // a scratch file, unlinked at creation
  bool direct_io_ = false;
  size_t chunk_bytes_;
  uint32_t requests_in_flight_;
};

}  // namespace sw
