// The file carrier: a secondary tier whose slots live in a file. Either a new
// scratch file the carrier owns (zero-filled, sparse, removed on dispose), or
// a read-only window on an existing file the user owns (a weights file).
//
// A read-only carrier's slots may also come from several segments of the
// file (one tensor per expert of a checkpoint): segment i's `count` slots at
// its own byte offset, the segments forming one linear slot space in order.
//
// Transfers are positional (pread/pwrite, uv_fs_read/uv_fs_write with an
// offset), so several threads may read at once without a shared file offset.
// Asynchronous transfers are split into chunk_bytes requests with
// requests_in_flight of them outstanding on the runtime's libuv loop: the page
// cache only reaches memcpy speed with several reads in flight.
//
// With direct_io, reads go through an O_DIRECT descriptor where the file
// system allows it: in place where the file offset and the host address agree
// modulo 4096, else through an aligned bounce buffer covering the enclosing
// 4096-byte blocks (so a tensor at any offset of a model file is read
// directly too). Writes use O_DIRECT only in place (aligned); their unaligned
// ends are buffered.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/carrier.hpp"

namespace sw {

struct FileCarrierOptions {
  std::string directory;  // new files only; empty: $TMPDIR or /tmp
  bool direct_io = false;
  size_t chunk_bytes = size_t{4} << 20;
  uint32_t requests_in_flight = 4;
};

// `count` slots at byte `offset` of a file.
struct FileSegment {
  uint64_t offset = 0;
  size_t count = 0;
};

// Bytes a file carrier moved, by path (for tests of direct I/O).
struct FileIoStats {
  uint64_t direct_bytes = 0;    // through O_DIRECT, in place
  uint64_t bounce_bytes = 0;    // through O_DIRECT, via an aligned bounce buffer
  uint64_t buffered_bytes = 0;  // through the page cache
  bool direct_open = false;     // an O_DIRECT descriptor is open and in use
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
  // A read-only carrier whose slots are the segments' in order. IO naming
  // the path if it cannot be opened; VALUE naming the segment if one passes
  // the end of the file or the slot count overflows.
  static Ref<FileCarrier> open_segments(const Ref<Runtime>& runtime, sw_dtype_t dtype, const std::string& path,
                                        const std::vector<FileSegment>& segments, const FileCarrierOptions& options);
  ~FileCarrier() override;

  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;

  // A new empty scratch carrier with the same settings, in the same
  // directory (the default one for a read-only carrier: the user's file's
  // directory may not be writable).
  Ref<Carrier> create_empty_like() const override;

  bool is_read_only() const override { return read_only_; }
  uint64_t stored_bytes() const override;
  size_t read_phase(size_t first) const override;
  const std::string& path() const { return path_; }
  FileIoStats io_stats() const;

 protected:
  void issue_read(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority priority,
                  bool whole_blocks) override;
  void issue_write(size_t first, size_t count, const std::byte* src, IoDone done) override;
  void dispose_storage() override { close_file(); }
  void allocate_storage(size_t size, bool zero_fill) override;

 private:
  class Transfer;

  // kPadded: a direct read of the enclosing aligned blocks straight into the
  // host buffer, whose blocks around the piece are scratch (read_async's
  // whole_blocks): an unaligned end of a transfer read in place.
  enum class PieceMode { kBuffered, kDirect, kBounce, kPadded };
  // Which ends of a piece may spill into the host buffer's enclosing blocks:
  // its start is the buffer's start (head) or its end the buffer's end (tail).
  struct Slack {
    bool head, tail;
  };
  // One piece of a transfer: `length` bytes at transfer position `position`.
  struct Piece {
    size_t length;
    PieceMode mode;
  };
  // A contiguous part of a transfer in the file: `length` bytes at byte
  // `file_offset`, at `position` in the host buffer.
  struct Extent {
    uint64_t file_offset;
    size_t position;
    size_t length;
  };

  FileCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, const FileCarrierOptions& options);
  void open_direct(int flags);
  void close_file() noexcept;
  // The file extents of slots [first, first + count), host positions from 0.
  std::vector<Extent> extents_of(size_t first, size_t count) const;
  // The next piece of `remaining` bytes at file offset `file_offset` and
  // host address `address`. Pieces whose offset, length and address are all
  // 4096-aligned may use O_DIRECT in place; other read pieces go through a
  // bounce buffer, or with `slack` at an unaligned end of the host buffer
  // are read padded (kPadded). The plan depends only on the addresses, not
  // on whether O_DIRECT turned out to work, so a transfer's request count is
  // fixed.
  Piece next_piece(bool write, uint64_t file_offset, const std::byte* address, size_t remaining,
                   Slack slack = {false, false}) const;
  size_t piece_count(bool write, const std::vector<Extent>& extents, const std::byte* buffer) const;
  int fd_for(bool direct) const;
  bool direct_usable() const { return direct_fd_ >= 0 && direct_ok_.load(std::memory_order_relaxed); }
  // O_DIRECT was refused at transfer time (EINVAL): use the normal fd only.
  void disable_direct() const { direct_ok_.store(false, std::memory_order_relaxed); }
  // An injected refusal of O_DIRECT (SW_FAULT_DIRECT_IO) fires: direct I/O
  // is disabled as after EINVAL, and the caller goes buffered.
  bool direct_refused() const;
  void count_bytes(PieceMode mode, bool used_direct, size_t bytes) const;
  // A bounce read of `length` bytes at `file_offset` into `dst`: the
  // enclosing aligned blocks through O_DIRECT. Returns the bytes delivered
  // (fewer at the end of the file), or -errno.
  ssize_t bounce_read_sync(uint64_t file_offset, std::byte* dst, size_t length) const;
  void transfer_sync(bool write, const std::vector<Extent>& extents, std::byte* buffer) const;
  void transfer_async(bool write, std::vector<Extent> extents, std::byte* buffer, IoDone done,
                      IoPriority priority = IoPriority::kDemand, bool whole_blocks = false);
  [[noreturn]] void io_failure(bool write, uint64_t file_offset, int error_number) const;

  FileCarrierOptions options_;
  std::string path_;
  int fd_ = -1;
  int direct_fd_ = -1;
  mutable std::atomic<bool> direct_ok_{false};
  uint64_t base_offset_ = 0;
  // Segmented carriers: segment i starts at file byte seg_offset_[i] and
  // holds slots [seg_first_[i], seg_first_[i + 1]). Empty: one run of the
  // carrier's slots at base_offset_.
  std::vector<uint64_t> seg_offset_;
  std::vector<size_t> seg_first_;
  mutable std::atomic<uint64_t> direct_bytes_{0}, bounce_bytes_{0}, buffered_bytes_{0};
  bool read_only_ = false;
  bool owns_file_ = false;  // a scratch file, unlinked at creation
  bool direct_io_ = false;
  size_t chunk_bytes_;
  uint32_t requests_in_flight_;
};

}  // namespace sw
