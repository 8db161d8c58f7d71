// The runtime's file request slots: every uv_fs read and write of the file
// carriers takes one while it is in flight, so that reads an operation waits
// on are never queued behind speculative ones in libuv's thread pool.
//
// Two classes. kDemand requests (the reads and writes of an operation, a
// projection, a scatter, an eviction, a promote_async) take any free slot.
// kPrefetch requests (the reads of sw_tiled_prefetch_async, whose caller has
// not asked for the values yet) take a slot only while no demand request
// waits for one and at most prefetch_slots() of them are in flight, so a demand request that
// arrives while prefetches stream finds free slots at once. Within a class,
// transfers are served in the order they were submitted (their ticket): a
// transfer submitted earlier issues all of its pieces before a later one
// takes a slot, also when the later one was already waiting while the earlier
// one's first pieces ran. A read that an operation waits on lands whole, as
// early as the device allows, instead of every queued transfer's last piece
// landing together at the end.
//
// The runtime's shared queue has as many slots as libuv's thread pool has
// threads (UV_THREADPOOL_SIZE, 4 by default): more requests in flight than
// threads would only queue inside libuv, where no priority holds. A device
// with a measured profile (carriers/file/device_profile.hpp) has a queue of
// its own, with the slots its profile found fastest: its O_DIRECT requests
// then go through the loop's io_uring where there is one, which takes no
// thread, else through the same thread pool (at most its thread count).
//
// Loop thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>

namespace sw {

enum class IoPriority : uint8_t { kDemand = 0, kPrefetch = 1 };

struct IoQueueStats {
  uint64_t granted[2] = {0, 0};       // slots taken, per class
  uint32_t max_in_flight[2] = {0, 0};  // the most in flight at once, per class
  uint32_t max_total = 0;              // the most in flight at once, both classes
};

class IoQueue {
 public:
  static constexpr uint32_t kPrefetchSlots = 2;

  explicit IoQueue(uint32_t slots);
  // A new transfer's place in the order, taken once when it is submitted.
  uint64_t next_ticket() { return next_ticket_++; }
  // libuv's thread pool size, as libuv reads it.
  static uint32_t default_slots();

  // Takes a slot for a request of class `p` of the transfer holding
  // `ticket` if one is free to that class and no earlier transfer of the
  // class waits for one.
  bool try_acquire(IoPriority p, uint64_t ticket);
  // Queues `ready` (in ticket order) to run once a slot may be free to class
  // `p`; it then calls try_acquire itself (and may queue again). Runs on the
  // loop thread, never inside wait().
  void wait(IoPriority p, uint64_t ticket, std::function<void()> ready);
  // Returns a slot taken by a request of class `p` and runs waiters that may
  // now take one, demand first.
  void release(IoPriority p);

  uint32_t slots() const { return slots_; }
  // At most kPrefetchSlots, and one fewer than all (when there are two or
  // more): a demand request never finds every slot taken by prefetches.
  uint32_t prefetch_slots() const { return slots_ < 2 ? 1 : std::min(kPrefetchSlots, slots_ - 1); }
  const IoQueueStats& stats() const { return stats_; }

 private:
  struct Waiter {
    uint64_t ticket;
    std::function<void()> ready;
  };

  bool free_for(IoPriority p) const;
  void pump();

  uint32_t slots_;
  uint32_t in_flight_[2] = {0, 0};
  std::deque<Waiter> waiting_[2];  // each in ticket order
  uint64_t next_ticket_ = 0;
  bool pumping_ = false;
  IoQueueStats stats_;
};

}  // namespace sw
