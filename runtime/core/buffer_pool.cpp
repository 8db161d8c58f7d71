#include "core/buffer_pool.hpp"

#include <sys/mman.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#include "base/error.hpp"

namespace sw {

BufferPool::BufferPool(size_t limit_bytes, const sw_allocator_t* allocator) : limit_(limit_bytes) {
  if (allocator && allocator->alloc && allocator->free) {
    allocator_ = *allocator;
    has_allocator_ = true;
  }
}

BufferPool::~BufferPool() {
  for (const Cached& c : lru_) free_raw(c.p, c.class_bytes);
}

size_t BufferPool::size_class(size_t bytes) {
  if (bytes <= 64) return 64;
  // Quarter steps between powers of two: at most 25 % waste. From 1 MiB on,
  // eighth steps (at most 12.5 %): buffers that large are tiles, each
  // TiledEvictable's of one size, and a budget of them is held at once (an
  // expert of 1024 x 2816 bf16, 5.5 MiB, is its own class, not 6 MiB).
  const size_t top = std::bit_floor(bytes);
  const size_t step = top >= (size_t{1} << 20) ? top / 8 : top / 4;
  const size_t rounded = (bytes + step - 1) / step * step;
  return rounded;
}

void* BufferPool::allocate_fresh(size_t bytes) {
  const size_t align = alignment_for(bytes);
  void* p = nullptr;
  if (has_allocator_) {
    p = allocator_.alloc(allocator_.user_data, bytes, align);
  } else if (bytes >= kHugeBytes) {
    // Mapped directly, not through malloc: a freed buffer of megabytes goes
    // back to the system at once, where glibc, having raised its mmap
    // threshold past the size of the first one freed, would keep the next
    // ones in its heap for good. Over-mapped by a huge page and trimmed to
    // the alignment.
    const size_t mapped = mapped_bytes(bytes), span = mapped + align;
    void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t base = reinterpret_cast<uintptr_t>(m);
    const uintptr_t aligned = (base + align - 1) / align * align;
    if (aligned > base) munmap(m, aligned - base);
    const uintptr_t end = base + span;
    if (end > aligned + mapped) munmap(reinterpret_cast<void*>(aligned + mapped), end - (aligned + mapped));
    p = reinterpret_cast<void*>(aligned);
    // Tiles and tensors of megabytes are streamed through whole: huge pages
    // (where the system grants them on request) spare the TLB misses of
    // walking several such buffers at once, as a gather does. Advice only.
    madvise(p, mapped, MADV_HUGEPAGE);
  } else if (posix_memalign(&p, align, bytes) != 0) {
    p = nullptr;
  }
  if (!p) throw std::bad_alloc();
  return p;
}

void BufferPool::free_raw(void* p, size_t bytes) noexcept {
  if (has_allocator_)
    allocator_.free(allocator_.user_data, p, bytes, alignment_for(bytes));
  else if (bytes >= kHugeBytes)
    munmap(p, mapped_bytes(bytes));
  else
    std::free(p);
}

void* BufferPool::acquire(size_t bytes, size_t* out_class_bytes) {
  const size_t cls = size_class(bytes);
  *out_class_bytes = cls;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      const auto entry = it->second.back();  // the warmest of its class
      it->second.pop_back();
      void* p = entry->p;
      lru_.erase(entry);
      cached_ -= footprint(cls);
      return p;
    }
  }
  try {
    return allocate_fresh(cls);
  } catch (const std::bad_alloc&) {
    // Drop the cache and try once more before reporting.
    std::list<Cached> drop;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      drop.swap(lru_);
      free_.clear();
      cached_ = 0;
    }
    for (const Cached& c : drop) free_raw(c.p, c.class_bytes);
    return allocate_fresh(cls);
  }
}

void BufferPool::give_back(void* p, size_t cls) noexcept {
  std::list<Cached> evicted;
  bool kept = false;
  if (footprint(cls) <= limit_) {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      auto& list = free_[cls];
      list.reserve(list.size() + 1);
      list.push_back(lru_.insert(lru_.end(), Cached{p, cls}));
      cached_ += footprint(cls);
      kept = true;
      while (cached_ > limit_) {  // the oldest go; `p` itself is the newest
        const Cached old = lru_.front();
        auto& same = free_[old.class_bytes];
        same.erase(same.begin());  // a class's oldest entry is the first
        evicted.splice(evicted.end(), lru_, lru_.begin());
        cached_ -= footprint(old.class_bytes);
      }
    } catch (...) {
    }
  }
  for (const Cached& c : evicted) free_raw(c.p, c.class_bytes);
  if (!kept) free_raw(p, cls);
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

HostBuffer::HostBuffer(std::shared_ptr<BufferPool> pool, size_t bytes, size_t offset)
    : pool_(std::move(pool)), bytes_(bytes), offset_(offset % 4096) {
  if (bytes == 0 || BufferPool::alignment_for(bytes + offset_) < 4096) offset_ = 0;
  if (bytes == 0) return;
  data_ = static_cast<std::byte*>(pool_->acquire(bytes + offset_, &class_bytes_)) + offset_;
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : pool_(std::move(o.pool_)),
      data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      class_bytes_(std::exchange(o.class_bytes_, 0)),
      offset_(std::exchange(o.offset_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = std::move(o.pool_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    class_bytes_ = std::exchange(o.class_bytes_, 0);
    offset_ = std::exchange(o.offset_, 0);
  }
  return *this;
}

void HostBuffer::reset() noexcept {
  if (data_) pool_->give_back(data_ - offset_, class_bytes_);
  data_ = nullptr;
  bytes_ = class_bytes_ = offset_ = 0;
  pool_.reset();
}

}  // namespace sw
