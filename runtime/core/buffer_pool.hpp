// Aligned host buffers with reuse. Fresh pages cost several times more than
// warm ones (page faults), so freed buffers are kept by size class up to a
// byte limit and handed out again. When a freed buffer does not fit under the
// limit, the buffers freed longest ago make room for it: the sizes a program
// uses now replace those it used before (a run of large temporaries would
// otherwise pay fresh pages forever once older sizes fill the pool).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "strideweave/strideweave.h"

namespace sw {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  BufferPool(size_t limit_bytes, const sw_allocator_t* allocator);
  ~BufferPool();

  // The size class a request of `bytes` is served from.
  static size_t size_class(size_t bytes);
  // Large buffers start on a huge-page boundary (see allocate_fresh).
  static size_t alignment_for(size_t bytes) {
    return bytes >= kHugeBytes ? kHugePage : bytes >= 65536 ? 4096 : 64;
  }
  static constexpr size_t kHugePage = size_t{2} << 20;
  // From half a huge page on: a 2.3 MiB decode weight in 4 KiB pages read
  // 0.85x as fast from DRAM as in huge pages (the TLB misses of a virtual
  // machine's two-level walk), and a plain read loop 0.55x; an O_DIRECT
  // read of 1 MiB into 4 KiB pages took the loop thread 80-95 us to submit
  // (the kernel pins each page), into a huge page 27.
  static constexpr size_t kHugeBytes = kHugePage / 2;
  // The bytes a buffer of class `class_bytes` maps: below one huge page,
  // a whole one (a huge page needs its whole aligned 2 MiB in the mapping;
  // a 1.55 MiB Q4_K expert tile of 1024 x 2816 then maps 2 MiB), else the
  // class itself.
  static size_t mapped_bytes(size_t class_bytes) {
    return class_bytes >= kHugeBytes && class_bytes < kHugePage ? kHugePage : class_bytes;
  }

  // Returns a buffer of at least `bytes` (class-rounded); throws OUT_OF_MEMORY.
  void* acquire(size_t bytes, size_t* out_class_bytes);
  void give_back(void* p, size_t class_bytes) noexcept;

  size_t cached_bytes() const;
  size_t limit() const { return limit_; }

 private:
  void* allocate_fresh(size_t bytes);
  // The memory a cached buffer of class `cls` holds: what the limit counts.
  size_t footprint(size_t cls) const { return has_allocator_ ? cls : mapped_bytes(cls); }
  void free_raw(void* p, size_t bytes) noexcept;

  size_t limit_;
  sw_allocator_t allocator_{};
  bool has_allocator_ = false;
  struct Cached {
    void* p;
    size_t class_bytes;
  };
  mutable std::mutex mutex_;
  std::list<Cached> lru_;  // cached buffers, freed longest ago first
  std::unordered_map<size_t, std::vector<std::list<Cached>::iterator>> free_;  // per class, oldest first
  size_t cached_ = 0;
};

// A buffer from a pool, returned to it on destruction. With `offset` the
// data starts that many bytes past a 4096-byte boundary: a direct-I/O read
// lands in place only at an address with its file offset's remainder (see
// Carrier::read_phase). Only buffers the pool aligns to 4096 bytes (64 KiB
// and up) take an offset; smaller ones ignore it and start aligned.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(std::shared_ptr<BufferPool> pool, size_t bytes, size_t offset = 0);
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  ~HostBuffer() { reset(); }
  void reset() noexcept;
  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The 4096-byte blocks enclosing [data(), data() + bytes()) lie inside the
  // pool's block: a 4096-aligned block (64 KiB and up) whose size class, a
  // multiple of 16 KiB, covers the offset and the bytes rounded up to 4096.
  bool whole_blocks() const { return data_ && BufferPool::alignment_for(bytes_ + offset_) >= 4096; }

 private:
  std::shared_ptr<BufferPool> pool_;
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  size_t class_bytes_ = 0;
  size_t offset_ = 0;  // of data_ into the pool's block
};

}  // namespace sw
