package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.EnumMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The binding's enums carry the C ABI's pinned numbers: checked against the library's names. */
class LibraryFactsTest {
  @Test
  void versionIsTheLibrarys() {
    assertEquals("0.3.0", StrideWeave.versionString());
    assertEquals((0 << 22) | (3 << 12), StrideWeave.version());
  }

  @Test
  void dtypesMatchTheLibrary() {
    for (DType d : DType.values()) {
      assertEquals(d.label(), Native.sw_dtype_name(d.value()));
      assertEquals(d.size(), Native.sw_dtype_size(d.value()));
    }
    assertEquals("invalid", Native.sw_dtype_name(DType.values().length + 1));
  }

  @Test
  void errorCodesMatchTheLibrary() {
    for (ErrorCode c : ErrorCode.values()) {
      assertEquals(c.value(), c.ordinal());
      assertEquals(c == ErrorCode.OK ? "OK" : c.name(), Native.sw_error_code_name(c.value()));
      if (c != ErrorCode.OK) {
        RuntimeException e = Errors.of(c, "m", null);
        assertEquals(c.exceptionClass(), e.getClass());
        assertEquals(c, ((StrideWeaveError) e).code());
      }
    }
    assertEquals("UNKNOWN", Native.sw_error_code_name(ErrorCode.values().length));
  }

  @Test
  void purposesMatchTheLibrary() {
    for (Purpose p : Purpose.values()) {
      assertEquals(p.label(), Native.sw_residency_purpose_name(p.value()));
    }
  }

  @Test
  void eachKindExtendsItsJdkExceptionAndIsAStrideWeaveError() {
    Map<ErrorCode, Class<?>> jdk = new EnumMap<>(ErrorCode.class);
    jdk.put(ErrorCode.TYPE, IllegalArgumentException.class);
    jdk.put(ErrorCode.VALUE, IllegalArgumentException.class);
    jdk.put(ErrorCode.DATA_CORRUPT, IllegalArgumentException.class);
    jdk.put(ErrorCode.INDEX, IndexOutOfBoundsException.class);
    jdk.put(ErrorCode.UNSUPPORTED, UnsupportedOperationException.class);
    jdk.put(ErrorCode.STATE, IllegalStateException.class);
    jdk.put(ErrorCode.STALE_HANDLE, IllegalStateException.class);
    jdk.put(ErrorCode.DEVICE_LOST, IllegalStateException.class);
    jdk.put(ErrorCode.CANCELLED, IllegalStateException.class);
    jdk.put(ErrorCode.OUT_OF_MEMORY, StrideWeaveException.class);
    jdk.put(ErrorCode.IO, StrideWeaveException.class);
    jdk.put(ErrorCode.TIMEOUT, StrideWeaveException.class);
    jdk.put(ErrorCode.INTERNAL, StrideWeaveException.class);
    for (ErrorCode c : ErrorCode.values()) {
      if (c == ErrorCode.OK) {
        continue;
      }
      RuntimeException e = Errors.of(c, "m " + c, null);
      Class<?> expected = jdk.get(c);
      assertTrue(expected != null, c::name);
      assertTrue(expected.isInstance(e), () -> c + " is a " + e.getClass().getName());
      // The kinds with a JDK counterpart are not StrideWeaveExceptions; the rest are.
      assertEquals(expected == StrideWeaveException.class, e instanceof StrideWeaveException, c::name);
      // One catch of RuntimeException and one instanceof test handle every kind.
      ErrorCode caught = null;
      try {
        throw e;
      } catch (RuntimeException r) {
        if (r instanceof StrideWeaveError err) {
          caught = err.code();
          assertEquals("m " + c, err.getMessage());
        }
      }
      assertEquals(c, caught);
    }
    assertTrue(DataCorruptException.class.getSuperclass() == InvalidValueException.class);
    assertFalse(IllegalStateException.class.isAssignableFrom(StrideWeaveException.class));
    assertFalse(IllegalArgumentException.class.isAssignableFrom(StrideWeaveException.class));
    // The public constructors keep the kind's code, and a cause survives.
    Throwable cause = new RuntimeException("cause");
    assertEquals(ErrorCode.INDEX, new IndexOutOfRangeException("x", cause).code());
    assertSame(cause, new IndexOutOfRangeException("x", cause).getCause());
    assertEquals(ErrorCode.UNSUPPORTED, new UnsupportedFeatureException("x").code());
    assertEquals(ErrorCode.TYPE, new TypeMismatchException("x").code());
    assertEquals(ErrorCode.DATA_CORRUPT, new DataCorruptException("x").code());
  }

  @Test
  void policyExceptionsOfTheJdkKindsMapToTheirCodes() {
    assertEquals(ErrorCode.INDEX, Errors.codeOf(new ArrayIndexOutOfBoundsException("x")));
    assertEquals(ErrorCode.VALUE, Errors.codeOf(new NumberFormatException("x")));
    assertEquals(ErrorCode.UNSUPPORTED, Errors.codeOf(new UnsupportedOperationException("x")));
    assertEquals(ErrorCode.TYPE, Errors.codeOf(new TypeMismatchException("x")));
    assertEquals(ErrorCode.DATA_CORRUPT, Errors.codeOf(new DataCorruptException("x")));
  }

  @Test
  void gradModeIsPerThreadAndScoped() throws Exception {
    assertTrue(StrideWeave.isGradEnabled());
    try (StrideWeave.GradMode off = StrideWeave.noGrad()) {
      assertFalse(StrideWeave.isGradEnabled());
      boolean[] other = new boolean[1];
      Thread t = new Thread(() -> other[0] = StrideWeave.isGradEnabled());
      t.start();
      t.join();
      assertTrue(other[0]);
    }
    assertTrue(StrideWeave.isGradEnabled());
  }
}
