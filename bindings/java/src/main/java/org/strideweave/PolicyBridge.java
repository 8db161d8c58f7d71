package org.strideweave;

/** The entry points of the native residency-policy trampoline (see native.i). */
final class PolicyBridge {
  private PolicyBridge() {}

  /**
   * Calls the policy for one request. Returns 0 with the plan handle in {@code outPlan[0]} (0
   * for none, which the library reports as TYPE), or a native error for what the policy threw.
   * Never throws back into C.
   */
  static long plan(Object policy, long required, int purpose, long[] outPlan) {
    try {
      ResidencyPlan plan = ((ResidencyPolicy) policy).plan(TileSet.fromHandle(required), Purpose.of(purpose));
      outPlan[0] = plan == null ? 0 : plan.newHandle();
      return 0;
    } catch (Throwable t) {
      try {
        return Errors.stash(t, "residency policy");
      } catch (Throwable again) {
        return Native.error_create(ErrorCode.INTERNAL.value(), "residency policy threw " + t.getClass().getName());
      }
    }
  }

  /** Reports a plan's outcome to the policy; never throws back into C. */
  static void outcome(Object policy, long plan, boolean committed, long promoted, long evicted) {
    try {
      ((ResidencyPolicy) policy).outcome(plan == 0 ? null : ResidencyPlan.fromHandle(plan), committed,
          TileSet.fromHandle(promoted), TileSet.fromHandle(evicted));
    } catch (Throwable t) {
      Thread.UncaughtExceptionHandler h = Thread.currentThread().getUncaughtExceptionHandler();
      if (h != null) {
        h.uncaughtException(Thread.currentThread(), t);
      }
    }
  }
}
