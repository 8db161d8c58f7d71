#include "carriers/zstd/zstd_carrier.hpp"

#include <zstd_errors.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "async/worker_pool.hpp"
#include "base/error.hpp"
#include "carriers/zstd/byte_shuffle.hpp"
#include "core/buffer_pool.hpp"
#include "core/dtype.hpp"

namespace sw {

// One compressed frame in its own exact-size allocation.
struct ZstdCarrier::Frame {
  std::byte* data = nullptr;
  size_t size = 0;

  Frame() = default;
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;
  ~Frame() { std::free(data); }
};

namespace {

// Frames hold whole blocks of a quantized dtype: the length asked for (by
// default 2^20 elements) rounded up to the block.
size_t frame_elements_for(sw_dtype_t dtype, size_t asked) {
  const auto block = static_cast<size_t>(dtype_block_elements(dtype));
  const size_t n = asked ? asked : size_t{1} << 20;
  return block > 1 ? (n + block - 1) / block * block : n;
}

// Reads at least this large unshuffle with streaming stores: the output
// leaves the caches before anyone reads it, and skipping the destination's
// read-for-ownership is what keeps the shuffled path near raw zstd speed.
constexpr size_t kStreamingReadBytes = size_t{8} << 20;

// Disposed storage at least this large is freed on a worker.
constexpr uint64_t kBackgroundFreeBytes = uint64_t{1} << 20;

[[noreturn]] void corrupt(size_t f, const std::string& why) {
  throw_error(SW_ERROR_DATA_CORRUPT, "zstd frame " + std::to_string(f) + " of the Zstd carrier is corrupt: " + why);
}

// What the carrier checks in a frame header, read per the frame format
// (RFC 8878, 3.1.1): zstd's own header parser is experimental API, whose ABI
// may change between shared library versions.
struct FrameHeader {
  size_t header_bytes = 0;
  bool has_checksum = false;
};

bool parse_frame_header(const std::byte* data, size_t size, FrameHeader* out) {
  if (size < 5) return false;
  uint32_t magic = 0;
  for (int i = 3; i >= 0; --i) magic = magic << 8 | static_cast<uint32_t>(data[i]);  // little endian
  if (magic != ZSTD_MAGICNUMBER) return false;
  const auto descriptor = static_cast<unsigned>(data[4]);
  const unsigned content_size_flag = descriptor >> 6;
  const bool single_segment = (descriptor >> 5) & 1;
  const unsigned dictionary_flag = descriptor & 3;
  static constexpr size_t kDictionaryBytes[4] = {0, 1, 2, 4};
  static constexpr size_t kContentSizeBytes[4] = {0, 2, 4, 8};
  size_t bytes = 5 + (single_segment ? 0 : 1) + kDictionaryBytes[dictionary_flag] +
                 (content_size_flag == 0 ? (single_segment ? 1 : 0) : kContentSizeBytes[content_size_flag]);
  if (bytes > size) return false;
  out->header_bytes = bytes;
  out->has_checksum = (descriptor >> 2) & 1;
  return true;
}

}  // namespace

ZstdCarrier::ZstdCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, const ZstdCarrierOptions& options)
    : Carrier(std::move(runtime), SW_CARRIER_ZSTD, dtype, size),
      level_(options.level),
      frame_elements_(frame_elements_for(dtype, options.frame_elements)),
      // A quantized block is not an array of equal parts: its bytes stay as they are.
      shuffle_(!dtype_is_quantized(dtype) && dtype_size(dtype) > 1 &&
               (options.shuffle == 1 || (options.shuffle == -1 && dtype_is_float(dtype)))) {
  (void)dtype_bytes(dtype, size);
  frames_ = zero_frames(size);
  for (const FramePtr& f : frames_) stored_bytes_ += f->size;
}

ZstdCarrier::~ZstdCarrier() = default;

size_t ZstdCarrier::frame_count_for(size_t size) const {
  return size / frame_elements_ + (size % frame_elements_ != 0);
}

size_t ZstdCarrier::frame_count() const {
  std::shared_lock<std::shared_mutex> lock(table_mutex_);
  return frames_.size();
}

size_t ZstdCarrier::frame_length(size_t f, size_t size) const {
  return std::min(frame_elements_, size - f * frame_elements_);
}

uint64_t ZstdCarrier::stored_bytes() const {
  std::shared_lock<std::shared_mutex> lock(table_mutex_);
  return stored_bytes_;
}

std::vector<ZstdCarrier::FramePtr> ZstdCarrier::snapshot(size_t f0, size_t f1) const {
  std::shared_lock<std::shared_mutex> lock(table_mutex_);
  if (f1 > frames_.size()) state_error("the Zstd carrier has been released");
  return std::vector<FramePtr>(frames_.begin() + static_cast<ptrdiff_t>(f0),
                               frames_.begin() + static_cast<ptrdiff_t>(f1));
}

ZstdCarrier::FramePtr ZstdCarrier::compress(const std::byte* data, size_t bytes) const {
  auto lease = cctx_pool_.acquire();
  ZSTD_CCtx* cctx = lease.get();
  // Parameters are sticky, but a context that failed midway must not carry
  // state into the next frame.
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level_);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);

  auto frame = std::make_shared<Frame>();
  const size_t bound = ZSTD_compressBound(bytes);
  if (ZSTD_isError(bound)) value_error("a zstd frame of " + std::to_string(bytes) + " bytes is too large");
  frame->data = static_cast<std::byte*>(std::malloc(bound ? bound : 1));
  if (!frame->data) throw std::bad_alloc();
  const size_t r = ZSTD_compress2(cctx, frame->data, bound, data, bytes);
  if (ZSTD_isError(r)) {
    if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation) throw std::bad_alloc();
    internal_error(std::string("zstd compression failed: ") + ZSTD_getErrorName(r));
  }
  // Keep only what the frame needs; shrinking in place does not copy.
  if (void* shrunk = std::realloc(frame->data, r)) frame->data = static_cast<std::byte*>(shrunk);
  frame->size = r;
  return frame;
}

void ZstdCarrier::decompress(size_t f, const Frame& frame, std::byte* out, size_t bytes, ZSTD_DCtx* dctx) const {
  runtime().check_fault(FaultKind::kDecompress, ("zstd frame " + std::to_string(f)).c_str());
  // A damaged header could drop the checksum flag and with it the check, so
  // the header is verified before trusting the frame.
  FrameHeader header;
  if (!parse_frame_header(frame.data, frame.size, &header)) corrupt(f, "its header is damaged");
  if (!header.has_checksum) corrupt(f, "its header lost the checksum flag");
  const unsigned long long content = ZSTD_getFrameContentSize(frame.data, frame.size);
  if (content != bytes) {
    if (content == ZSTD_CONTENTSIZE_UNKNOWN || content == ZSTD_CONTENTSIZE_ERROR)
      corrupt(f, "its header declares no content size");
    corrupt(f, "its header declares " + std::to_string(content) + " bytes, expected " + std::to_string(bytes));
  }
  const size_t r = ZSTD_decompressDCtx(dctx, out, bytes, frame.data, frame.size);
  if (ZSTD_isError(r)) {
    if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation) throw std::bad_alloc();
    corrupt(f, ZSTD_getErrorName(r));
  }
  if (r != bytes) corrupt(f, "it holds " + std::to_string(r) + " bytes, expected " + std::to_string(bytes));
}

std::vector<ZstdCarrier::FramePtr> ZstdCarrier::zero_frames(size_t size) const {
  const size_t n = frame_count_for(size);
  std::vector<FramePtr> frames;
  frames.reserve(n);
  if (n == 0) return frames;
  // calloc hands out untouched zero pages: reading them costs no page faults.
  const size_t longest = frame_length(0, size);
  std::unique_ptr<std::byte, decltype(&std::free)> zeros(static_cast<std::byte*>(std::calloc(bytes_of(longest), 1)),
                                                         &std::free);
  if (!zeros) throw std::bad_alloc();
  FramePtr full = compress(zeros.get(), bytes_of(longest));
  for (size_t f = 0; f + 1 < n; ++f) frames.push_back(full);
  const size_t last = frame_length(n - 1, size);
  frames.push_back(last == longest ? full : compress(zeros.get(), bytes_of(last)));
  return frames;
}

void ZstdCarrier::decode(size_t first, size_t count, std::byte* dst) const {
  if (count == 0) return;
  const size_t es = dtype_block_bytes(dtype());  // the shuffle's element (never a quantized block)
  const size_t size = this->size();
  const size_t f0 = first / frame_elements_;
  const size_t f1 = (first + count - 1) / frame_elements_ + 1;
  const std::vector<FramePtr> frames = snapshot(f0, f1);
  auto dctx = dctx_pool_.acquire();
  HostBuffer scratch;
  const bool streaming = bytes_of(count) >= kStreamingReadBytes;
  for (size_t f = f0; f < f1; ++f) {
    const size_t begin = f * frame_elements_;
    const size_t n = frame_length(f, size);
    const size_t lo = std::max(first, begin);
    const size_t hi = std::min(first + count, begin + n);
    std::byte* out = dst + bytes_of(lo - first);
    const Frame& frame = *frames[f - f0];
    if (!shuffle_ && lo == begin && hi == begin + n) {
      decompress(f, frame, out, bytes_of(n), dctx.get());
      continue;
    }
    // Shuffled or partial frames go through scratch; the bytes of a partial
    // range are then gathered straight from their planes.
    if (!scratch.data()) scratch = HostBuffer(runtime().pool(), bytes_of(std::min(frame_elements_, size)));
    decompress(f, frame, scratch.data(), bytes_of(n), dctx.get());
    if (shuffle_)
      unshuffle_bytes(scratch.data() + (lo - begin), n, hi - lo, es, out, streaming);
    else
      std::memcpy(out, scratch.data() + bytes_of(lo - begin), bytes_of(hi - lo));
  }
}

std::vector<ZstdCarrier::FramePtr> ZstdCarrier::encode(size_t first, size_t count, const std::byte* src) const {
  std::vector<FramePtr> result;
  if (count == 0) return result;
  const size_t es = dtype_block_bytes(dtype());  // the shuffle's element (never a quantized block)
  const size_t size = this->size();
  const size_t f0 = first / frame_elements_;
  const size_t f1 = (first + count - 1) / frame_elements_ + 1;
  result.reserve(f1 - f0);
  HostBuffer scratch;
  for (size_t f = f0; f < f1; ++f) {
    const size_t begin = f * frame_elements_;
    const size_t n = frame_length(f, size);
    const size_t lo = std::max(first, begin);
    const size_t hi = std::min(first + count, begin + n);
    const std::byte* in = src + bytes_of(lo - first);
    const bool whole = lo == begin && hi == begin + n;
    if (whole && !shuffle_) {
      result.push_back(compress(in, bytes_of(n)));
      continue;
    }
    if (!scratch.data()) scratch = HostBuffer(runtime().pool(), bytes_of(std::min(frame_elements_, size)));
    if (!whole) {
      // Patch the frame's stored (shuffled) form in place: only the planes'
      // bytes of the written range change.
      const FramePtr old = snapshot(f, f + 1).front();
      auto dctx = dctx_pool_.acquire();
      decompress(f, *old, scratch.data(), bytes_of(n), dctx.get());
    }
    if (shuffle_)
      shuffle_bytes(in, hi - lo, es, scratch.data() + (lo - begin), n);
    else
      std::memcpy(scratch.data() + bytes_of(lo - begin), in, bytes_of(hi - lo));
    result.push_back(compress(scratch.data(), bytes_of(n)));
  }
  return result;
}

void ZstdCarrier::commit(size_t f0, std::vector<FramePtr>& frames) noexcept {
  std::unique_lock<std::shared_mutex> lock(table_mutex_);
  // Disposed while the frames were being built: there is nothing to update.
  if (f0 + frames.size() > frames_.size()) return;
  for (size_t i = 0; i < frames.size(); ++i) {
    FramePtr& slot = frames_[f0 + i];
    stored_bytes_ += frames[i]->size;
    stored_bytes_ -= slot->size;
    // The old frame is released after the lock, by `frames`.
    slot.swap(frames[i]);
  }
  lock.unlock();
  frames.clear();
}

void ZstdCarrier::read_slots(size_t first, size_t count, void* dst) const {
  decode(first, count, static_cast<std::byte*>(dst));
}

void ZstdCarrier::write_slots(size_t first, size_t count, const void* src) {
  std::vector<FramePtr> frames = encode(first, count, static_cast<const std::byte*>(src));
  commit(first / frame_elements_, frames);
}

std::vector<std::pair<size_t, size_t>> ZstdCarrier::split_for_workers(size_t first, size_t count) const {
  std::vector<std::pair<size_t, size_t>> ranges;
  if (count == 0) return ranges;
  const size_t f0 = first / frame_elements_;
  const size_t frames = (first + count - 1) / frame_elements_ + 1 - f0;
  // A few jobs per worker: a worker that another process holds up leaves
  // its share to the others instead of finishing last.
  const size_t jobs = std::max<size_t>(1, std::min<size_t>(4 * runtime().workers().threads(), frames));
  const size_t end = first + count;
  for (size_t j = 0; j < jobs; ++j) {
    const size_t a = f0 + frames * j / jobs, b = f0 + frames * (j + 1) / jobs;
    // Frame boundaries inside the range; the first and last jobs end at its
    // edges, which may fall inside a frame.
    const size_t lo = j == 0 ? first : a * frame_elements_;
    const size_t hi = j + 1 == jobs ? end : b * frame_elements_;
    ranges.emplace_back(lo, hi);
  }
  return ranges;
}

namespace {

// Joins the jobs of one asynchronous transfer. Every completion runs on the
// loop thread, so the count needs no atomics; the first error wins.
struct TransferJoin {
  size_t pending = 0;
  Status status;
  IoDone done;
  std::function<void()> on_success;  // runs on the loop thread before done

  void finished(Status st) {
    if (!st.ok() && status.ok()) status = std::move(st);
    if (--pending != 0) return;
    if (status.ok() && on_success) on_success();
    IoDone d = std::move(done);
    d(std::move(status));
  }
};

}  // namespace

void ZstdCarrier::issue_read(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority, bool) {
  auto ranges = split_for_workers(first, count);
  if (ranges.empty()) {
    runtime().run_on_worker([] {}, std::move(done));
    return;
  }
  auto join = std::make_shared<TransferJoin>();
  join->pending = ranges.size();
  join->done = std::move(done);
  Ref<ZstdCarrier> self(this);
  for (const auto& [lo, hi] : ranges) {
    runtime().run_on_worker(
        [self, lo = lo, hi = hi, out = dst + self->bytes_of(lo - first)] { self->decode(lo, hi - lo, out); },
        [join](Status st) { join->finished(std::move(st)); });
  }
}

void ZstdCarrier::issue_write(size_t first, size_t count, const std::byte* src, IoDone done) {
  auto ranges = split_for_workers(first, count);
  if (ranges.empty()) {
    runtime().run_on_worker([] {}, std::move(done));
    return;
  }
  // Each job builds the frames of its range into its own part of `frames`;
  // they are swapped in together once every job has succeeded.
  const size_t f0 = first / frame_elements_;
  const size_t f1 = (first + count - 1) / frame_elements_ + 1;
  auto frames = std::make_shared<std::vector<FramePtr>>(f1 - f0);
  auto join = std::make_shared<TransferJoin>();
  join->pending = ranges.size();
  join->done = std::move(done);
  Ref<ZstdCarrier> self(this);
  join->on_success = [self, frames, f0] { self->commit(f0, *frames); };
  for (const auto& [lo, hi] : ranges) {
    runtime().run_on_worker(
        [self, frames, f0, lo = lo, hi = hi, in = src + self->bytes_of(lo - first)] {
          std::vector<FramePtr> built = self->encode(lo, hi - lo, in);
          std::move(built.begin(), built.end(), frames->begin() + static_cast<ptrdiff_t>(lo / self->frame_elements_ - f0));
        },
        [join](Status st) { join->finished(std::move(st)); });
  }
}

void ZstdCarrier::corrupt_frame(size_t frame) {
  std::unique_lock<std::shared_mutex> lock(table_mutex_);
  if (frame >= frames_.size())
    index_error("frame " + std::to_string(frame) + " is outside the Zstd carrier's " + std::to_string(frames_.size()) +
                " frames");
  const Frame& old = *frames_[frame];
  // Copy on write: zero frames are shared, and only this one may break.
  auto damaged = std::make_shared<Frame>();
  damaged->data = static_cast<std::byte*>(std::malloc(old.size));
  if (!damaged->data) throw std::bad_alloc();
  std::memcpy(damaged->data, old.data, old.size);
  damaged->size = old.size;
  FrameHeader parsed;
  const size_t header = parse_frame_header(old.data, old.size, &parsed) ? parsed.header_bytes : 0;
  const size_t payload_end = old.size >= header + 4 ? old.size - 4 : old.size;  // before the checksum
  const size_t at = header + (payload_end - header) / 2;
  damaged->data[at] ^= std::byte{0xff};
  frames_[frame] = std::move(damaged);
}

std::vector<std::byte> ZstdCarrier::frame_bytes(size_t frame) const {
  std::shared_lock<std::shared_mutex> lock(table_mutex_);
  if (frame >= frames_.size())
    index_error("frame " + std::to_string(frame) + " is outside the Zstd carrier's " + std::to_string(frames_.size()) +
                " frames");
  const Frame& f = *frames_[frame];
  return std::vector<std::byte>(f.data, f.data + f.size);
}

void ZstdCarrier::replace_frame(size_t frame, const std::byte* bytes, size_t length) {
  auto raw = std::make_shared<Frame>();
  raw->data = static_cast<std::byte*>(std::malloc(length ? length : 1));
  if (!raw->data) throw std::bad_alloc();
  if (length) std::memcpy(raw->data, bytes, length);
  raw->size = length;
  std::unique_lock<std::shared_mutex> lock(table_mutex_);
  if (frame >= frames_.size())
    index_error("frame " + std::to_string(frame) + " is outside the Zstd carrier's " + std::to_string(frames_.size()) +
                " frames");
  stored_bytes_ += length;
  stored_bytes_ -= frames_[frame]->size;
  frames_[frame] = std::move(raw);
}

void ZstdCarrier::dispose_storage() {
  std::vector<FramePtr> gone;
  uint64_t bytes = 0;
  {
    std::unique_lock<std::shared_mutex> lock(table_mutex_);
    gone.swap(frames_);
    std::swap(bytes, stored_bytes_);
  }
  dctx_pool_.clear();
  cctx_pool_.clear();
  // Returning large frames to the system unmaps their pages, about a fifth of
  // the time their decompression took. A move disposes its source on the loop
  // thread, which must not stall that long: a worker frees them instead. The
  // workers outlive every carrier (each holds the runtime).
  if (bytes >= kBackgroundFreeBytes) {
    auto frames = std::make_shared<std::vector<FramePtr>>(std::move(gone));
    runtime().workers().submit([frames] { frames->clear(); });
  }
}

void ZstdCarrier::allocate_storage(size_t size, bool) {
  (void)dtype_bytes(dtype(), size);
  std::vector<FramePtr> frames = zero_frames(size);
  uint64_t bytes = 0;
  for (const FramePtr& f : frames) bytes += f->size;
  std::unique_lock<std::shared_mutex> lock(table_mutex_);
  frames_.swap(frames);
  stored_bytes_ = bytes;
}

Ref<Carrier> ZstdCarrier::create_empty_like() const {
  ZstdCarrierOptions o;
  o.level = level_;
  o.frame_elements = frame_elements_;
  o.shuffle = shuffle_ ? 1 : 0;
  return make_ref<ZstdCarrier>(runtime_ref(), dtype(), 0, o);
}

}  // namespace sw
