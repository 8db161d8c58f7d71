// The zstd carrier: a secondary tier holding its values compressed in host
// memory, one independent zstd frame per `frame_elements` chunk (the last one
// shorter). Frames carry a content checksum and are verified on every
// decompression, so a damaged frame is a DATA_CORRUPT error naming it, never
// garbage. Float dtypes are byte-shuffled before compression by default.
//
// Frames are immutable once built: readers copy the pointers they need out of
// the frame table under a shared lock and decompress without holding it;
// writers build every new frame first and swap them in under the exclusive
// lock, so a failed write changes nothing.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "core/carrier.hpp"

namespace sw {

struct ZstdCarrierOptions {
  int level = 1;
  size_t frame_elements = size_t{1} << 20;
  // -1: on for float dtypes, 0: off, 1: on.
  int shuffle = -1;
};

// Idle zstd contexts kept for reuse: making one costs more than a small frame,
// and reusing one keeps its tables warm.
template <typename Ctx, Ctx* (*Create)(), size_t (*Destroy)(Ctx*)>
class ZstdContextPool {
 public:
  class Lease {
   public:
    Lease(ZstdContextPool* pool, Ctx* ctx) : pool_(pool), ctx_(ctx) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_->give_back(ctx_); }
    Ctx* get() const { return ctx_; }

   private:
    ZstdContextPool* pool_;
    Ctx* ctx_;
  };

  ZstdContextPool() = default;
  ZstdContextPool(const ZstdContextPool&) = delete;
  ZstdContextPool& operator=(const ZstdContextPool&) = delete;
  ~ZstdContextPool() { clear(); }

  // Throws std::bad_alloc when zstd cannot allocate a context.
  Lease acquire() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        Ctx* c = idle_.back();
        idle_.pop_back();
        return Lease(this, c);
      }
    }
    Ctx* c = Create();
    if (!c) throw std::bad_alloc();
    return Lease(this, c);
  }

  void clear() noexcept {
    std::vector<Ctx*> idle;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle.swap(idle_);
    }
    for (Ctx* c : idle) Destroy(c);
  }

 private:
  void give_back(Ctx* c) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.push_back(c);
      return;
    } catch (...) {
    }
    Destroy(c);
  }

  std::mutex mutex_;
  std::vector<Ctx*> idle_;
};

class ZstdCarrier final : public Carrier {
 public:
  // A zero-filled carrier of `size` slots. The options must be valid (the API
  // layer checks them); VALUE if the size in bytes overflows.
  ZstdCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, const ZstdCarrierOptions& options);
  ~ZstdCarrier() override;

  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;
  // Spread the frames of the range over the runtime's workers, one job each.

  // Total compressed bytes of the frames.
  uint64_t stored_bytes() const override;
  // An empty zstd carrier with the same level, frame length and shuffle.
  Ref<Carrier> create_empty_like() const override;

  size_t frame_elements() const { return frame_elements_; }
  size_t frame_count() const;
  bool shuffled() const { return shuffle_; }
  int level() const { return level_; }

  // Testing: flips one byte in the middle of frame `frame`'s compressed
  // payload (clear of the frame header), so its next decompression fails
  // its checksum. INDEX if there is no such frame.
  void corrupt_frame(size_t frame);
  // Testing: the stored bytes of frame `frame`, and storing `length` raw
  // bytes in its place (whatever they hold: the next read of the frame
  // checks them as it checks any frame). INDEX if there is no such frame.
  std::vector<std::byte> frame_bytes(size_t frame) const;
  void replace_frame(size_t frame, const std::byte* bytes, size_t length);

 protected:
  void issue_read(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority priority,
                  bool whole_blocks) override;
  void issue_write(size_t first, size_t count, const std::byte* src, IoDone done) override;
  void dispose_storage() override;
  void allocate_storage(size_t size, bool zero_fill) override;

 private:
  struct Frame;
  using FramePtr = std::shared_ptr<const Frame>;
  using DecompressionContexts = ZstdContextPool<ZSTD_DCtx, ZSTD_createDCtx, ZSTD_freeDCtx>;
  using CompressionContexts = ZstdContextPool<ZSTD_CCtx, ZSTD_createCCtx, ZSTD_freeCCtx>;

  size_t frame_count_for(size_t size) const;
  // Elements in frame `f` of a carrier of `size` slots.
  size_t frame_length(size_t f, size_t size) const;
  // Pointers to frames [f0, f1); STATE if the storage is gone.
  std::vector<FramePtr> snapshot(size_t f0, size_t f1) const;
  // Zero-filled frames for `size` slots; equal lengths share one frame.
  std::vector<FramePtr> zero_frames(size_t size) const;

  FramePtr compress(const std::byte* data, size_t bytes) const;
  // Decompresses frame `f` (all `bytes` of it) into `out`, verifying its
  // header, size and checksum: DATA_CORRUPT naming the frame otherwise.
  void decompress(size_t f, const Frame& frame, std::byte* out, size_t bytes, ZSTD_DCtx* dctx) const;

  // Reads slots [first, first + count) into `dst`.
  void decode(size_t first, size_t count, std::byte* dst) const;
  // The new frames covering slots [first, first + count) with `src` written
  // over them, starting at frame first / frame_elements. Changes nothing.
  std::vector<FramePtr> encode(size_t first, size_t count, const std::byte* src) const;
  // Swaps `frames` in, starting at frame `f0`.
  void commit(size_t f0, std::vector<FramePtr>& frames) noexcept;

  // Slot ranges, split at frame boundaries, of one job per worker.
  std::vector<std::pair<size_t, size_t>> split_for_workers(size_t first, size_t count) const;

  const int level_;
  const size_t frame_elements_;
  const bool shuffle_;

  mutable std::shared_mutex table_mutex_;
  std::vector<FramePtr> frames_;  // guarded by table_mutex_
  uint64_t stored_bytes_ = 0;     // guarded by table_mutex_

  mutable DecompressionContexts dctx_pool_;
  mutable CompressionContexts cctx_pool_;
};

}  // namespace sw
