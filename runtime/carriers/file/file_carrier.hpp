// The file carrier: a secondary tier whose slots live in a file. Either a new
// scratch file the carrier owns (zero-filled, sparse, removed on dispose), or
// a read-only window on an existing file the user owns (a weights file).
//
// A read-only carrier's slots may also come from several segments (one
// tensor per expert of a checkpoint), of one file or of several (a sharded
// checkpoint): segment i's `count` slots at its own byte offset of its own
// file, the segments forming one linear slot space in order. Each file is
// opened once, whatever the number of its segments, and keeps its own
// descriptors and its own O_DIRECT state.
//
// Transfers are positional (pread/pwrite, uv_fs_read/uv_fs_write with an
// offset), so several threads may read at once without a shared file offset.
// Asynchronous transfers are split into chunk_bytes requests with
// requests_in_flight of them outstanding on the runtime's libuv loop: the page
// cache only reaches memcpy speed with several reads in flight. Left 0, both
// come from the device's profile (device_profile.hpp) for a carrier reading
// through O_DIRECT, measured when a large enough file is opened; otherwise
// 4 MiB and 4.
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
#include <memory>
#include <string>
#include <vector>

#include "carriers/file/device_profile.hpp"
#include "core/carrier.hpp"

namespace sw {

struct FileCarrierOptions {
  std::string directory;  // new files only; empty: $TMPDIR or /tmp
  bool direct_io = false;
  size_t chunk_bytes = 0;          // 0: the device profile's, else 4 MiB
  uint32_t requests_in_flight = 0;  // 0: the device profile's, else 4
};

// `count` slots at byte `offset` of a file: of paths[file], for the list of
// paths given to open_segments.
struct FileSegment {
  uint64_t offset = 0;
  size_t count = 0;
  size_t file = 0;
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
  // The same over several files: segment i lies in paths[segments[i].file].
  // Each path is opened once, in order (list each file once); a failure
  // closes what was opened. VALUE for a segment naming no path.
  static Ref<FileCarrier> open_segments(const Ref<Runtime>& runtime, sw_dtype_t dtype,
                                        const std::vector<std::string>& paths, const std::vector<FileSegment>& segments,
                                        const FileCarrierOptions& options);
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
  // The file's path (the first file's, for a carrier over several).
  const std::string& path() const { return files_.front()->path; }
  // direct_open: true when every file of the carrier reads through O_DIRECT.
  FileIoStats io_stats() const;
  // The chunk size and requests in flight its transfers use, and where they
  // came from (the device profile, or the defaults; options the caller set
  // override either).
  size_t chunk_bytes() const { return chunk_bytes_; }
  uint32_t requests_in_flight() const { return requests_in_flight_; }
  const DeviceProfile& device_profile() const { return profile_; }
  // The request slots its transfers take (loop thread only): its device's
  // when its requests in flight are the device's measured best, else the
  // runtime's shared ones.
  IoQueue& io_queue();

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
  // One file the carrier reads or writes: its descriptor, an O_DIRECT one
  // (-1: none), and whether O_DIRECT still works on it. The carrier's table
  // of them is fixed once it is open; segments and extents point into it.
  struct OpenFile {
    std::string path;
    int fd = -1;
    int direct_fd = -1;
    mutable std::atomic<bool> direct_ok{false};

    bool direct_usable() const { return direct_fd >= 0 && direct_ok.load(std::memory_order_relaxed); }
    // O_DIRECT was refused at transfer time (EINVAL): use the normal fd only.
    void disable_direct() const { direct_ok.store(false, std::memory_order_relaxed); }
    int fd_for(bool direct) const { return direct && direct_usable() ? direct_fd : fd; }
  };
  // Slots [first, next segment's first) at byte `offset` of `file`.
  struct Segment {
    const OpenFile* file;
    uint64_t offset;
    size_t first;
  };
  // A contiguous part of a transfer in one file: `length` bytes at byte
  // `file_offset` of `file`, at `position` in the host buffer.
  struct Extent {
    const OpenFile* file;
    uint64_t file_offset;
    size_t position;
    size_t length;
  };

  FileCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, const FileCarrierOptions& options);
  // Opens `path` read-only as the next file of the table (IO naming it on
  // failure); returns it with its size in bytes.
  const OpenFile& add_file(const std::string& path, uint64_t* out_bytes);
  void open_direct(OpenFile& file, int flags);
  // Sets the chunk size and requests in flight the options left 0 from the
  // profile of the first file's device (measuring it when `may_probe`),
  // once that file is open.
  void resolve_io(uint64_t file_bytes, bool may_probe);
  void close_file() noexcept;
  // The files, quoted, for messages: 'a' or 'a', 'b' and 'c'.
  std::string files_text() const;
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
  // An injected refusal of O_DIRECT (SW_FAULT_DIRECT_IO) fires: direct I/O
  // is disabled on `file` as after EINVAL, and the caller goes buffered.
  bool direct_refused(const OpenFile& file) const;
  void count_bytes(PieceMode mode, bool used_direct, size_t bytes) const;
  // A bounce read of `length` bytes at `file_offset` of `file` into `dst`:
  // the enclosing aligned blocks through O_DIRECT. Returns the bytes
  // delivered (fewer at the end of the file), or -errno.
  ssize_t bounce_read_sync(const OpenFile& file, uint64_t file_offset, std::byte* dst, size_t length) const;
  void transfer_sync(bool write, const std::vector<Extent>& extents, std::byte* buffer) const;
  void transfer_async(bool write, std::vector<Extent> extents, std::byte* buffer, IoDone done,
                      IoPriority priority = IoPriority::kDemand, bool whole_blocks = false);
  [[noreturn]] static void io_failure(bool write, const OpenFile& file, uint64_t file_offset, int error_number);

  FileCarrierOptions options_;
  // The files, in the order opened: one, except for a segmented carrier
  // over several. Never empty once the carrier is made.
  std::vector<std::unique_ptr<OpenFile>> files_;
  uint64_t base_offset_ = 0;
  // Segmented carriers: segment i holds slots [segments_[i].first,
  // segments_[i + 1].first), the last one up to size(). Empty: one run of
  // the carrier's slots at base_offset_ of the first file.
  std::vector<Segment> segments_;
  mutable std::atomic<uint64_t> direct_bytes_{0}, bounce_bytes_{0}, buffered_bytes_{0};
  bool read_only_ = false;
  bool owns_file_ = false;  // a scratch file, unlinked at creation
  bool direct_io_ = false;
  size_t chunk_bytes_ = kDefaultChunkBytes;
  uint32_t requests_in_flight_ = kDefaultRequestsInFlight;
  DeviceProfile profile_;
};

}  // namespace sw
