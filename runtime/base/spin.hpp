// Bounded spinning before a thread blocks. On the machines this runtime is
// built for (virtual CPUs that halt as soon as they idle), waking a thread
// that blocked costs tens of microseconds; one still spinning when its
// event comes sees it at once. Every spin here is bounded, so an idle
// runtime costs nothing.
#pragma once

#include <sched.h>

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SW_CPU_RELAX() _mm_pause()
#else
#define SW_CPU_RELAX() ((void)0)
#endif

namespace sw {

// Spins until ready() or `limit` has passed; returns ready(). With
// `yielding`, each round ends in sched_yield(), so that a spinner sharing its
// CPU with a thread that has work (the thread it waits for, or any other)
// lets that thread run at once; without, it only relaxes.
template <typename Ready>
bool spin_until(Ready ready, std::chrono::microseconds limit, bool yielding) {
  if (ready()) return true;
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      SW_CPU_RELAX();
    }
    if (yielding) sched_yield();
    if (std::chrono::steady_clock::now() >= end) return ready();
  }
}

}  // namespace sw
