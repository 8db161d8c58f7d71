package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
  void stateKindsAreIllegalStateExceptionsAndTheRestShareOneRoot() {
    assertTrue(new InvalidStateException("x") instanceof IllegalStateException);
    assertTrue(new StaleHandleException("x") instanceof IllegalStateException);
    assertTrue(new DataCorruptException("x") instanceof InvalidValueException);
    assertTrue(new StorageIOException("x") instanceof StrideWeaveException);
    assertFalse(IllegalStateException.class.isAssignableFrom(StrideWeaveException.class));
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
