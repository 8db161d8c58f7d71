#include "async/io_queue.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace sw {

IoQueue::IoQueue(uint32_t slots) : slots_(std::max<uint32_t>(slots, 1)) {}

uint32_t IoQueue::default_slots() {
  // libuv: UV_THREADPOOL_SIZE, 4 when unset or 0, at most 1024.
  const char* env = std::getenv("UV_THREADPOOL_SIZE");
  const long n = env ? std::strtol(env, nullptr, 10) : 0;
  return n <= 0 ? 4u : static_cast<uint32_t>(std::min<long>(n, 1024));
}

bool IoQueue::free_for(IoPriority p) const {
  if (in_flight_[0] + in_flight_[1] >= slots_) return false;
  if (p == IoPriority::kDemand) return true;
  return waiting_[0].empty() && in_flight_[1] < prefetch_slots();
}

bool IoQueue::try_acquire(IoPriority p, uint64_t ticket) {
  const auto c = static_cast<size_t>(p);
  // An earlier transfer waiting in the class goes first: a later one does not
  // overtake it (the waiter pump() runs has left the queue already).
  if (!free_for(p) || (!waiting_[c].empty() && waiting_[c].front().ticket < ticket)) return false;
  ++in_flight_[c];
  ++stats_.granted[c];
  stats_.max_in_flight[c] = std::max(stats_.max_in_flight[c], in_flight_[c]);
  stats_.max_total = std::max(stats_.max_total, in_flight_[0] + in_flight_[1]);
  return true;
}

void IoQueue::wait(IoPriority p, uint64_t ticket, std::function<void()> ready) {
  auto& q = waiting_[static_cast<size_t>(p)];
  auto at = std::upper_bound(q.begin(), q.end(), ticket, [](uint64_t t, const Waiter& w) { return t < w.ticket; });
  q.insert(at, Waiter{ticket, std::move(ready)});
}

void IoQueue::release(IoPriority p) {
  --in_flight_[static_cast<size_t>(p)];
  pump();
}

void IoQueue::pump() {
  if (pumping_) return;  // a waiter releasing a slot inside its turn: the loop below goes on
  pumping_ = true;
  for (;;) {
    size_t c = 2;
    if (!waiting_[0].empty() && free_for(IoPriority::kDemand))
      c = 0;
    else if (!waiting_[1].empty() && free_for(IoPriority::kPrefetch))
      c = 1;
    if (c == 2) break;
    std::function<void()> ready = std::move(waiting_[c].front().ready);
    waiting_[c].pop_front();
    ready();
  }
  pumping_ = false;
}

}  // namespace sw
