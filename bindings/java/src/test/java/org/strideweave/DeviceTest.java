package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The device bridge contract on the fake backend, through the Java classes. */
class DeviceTest extends Fixtures {
  Device dev;

  @BeforeEach
  void fakeDevice() {
    dev = Device.fake(rt);
  }

  @AfterEach
  void closeDevice() {
    dev.close();
  }

  static Device.ObjectSpec specF32(long n) {
    return new Device.ObjectSpec(DType.F32, new long[] {n}, 4096, 64);
  }

  List<String> log() {
    return dev.call(h -> {
      long[] n = new long[1];
      Native.sw_fake_device_log_count(h, n);
      List<String> lines = new ArrayList<>();
      for (long i = 0; i < n[0]; ++i) {
        lines.add(Native.fake_device_log_entry(h, i));
      }
      return lines;
    });
  }

  static ByteBuffer bytes(int... values) {
    ByteBuffer b = ByteBuffer.allocateDirect(values.length);
    for (int v : values) {
      b.put((byte) v);
    }
    b.clear();
    return b;
  }

  static int[] unsigned(ByteBuffer b) {
    int[] out = new int[b.remaining()];
    for (int i = 0; i < out.length; ++i) {
      out[i] = b.get(b.position() + i) & 0xff;
    }
    return out;
  }

  @Test
  void allocationLogsItsExactArgumentsAndFreesOnce() {
    assertEquals(Device.Kind.FAKE, dev.kind());
    assertEquals(1, dev.generation());
    try (DeviceAllocation a = dev.allocate(specF32(16), 64)) {
      assertEquals(64, a.extentBytes());
      assertEquals(1, a.generation());
      assertEquals(List.of("alloc alloc=1 bytes=64 alignment=64"), log());
      a.free();
      assertEquals("free alloc=1", log().get(1));
      InvalidStateException e = exact(InvalidStateException.class, a::free);
      assertTrue(e.getMessage().contains("already freed"), e.getMessage());
    }
  }

  @Test
  void badExtentsAndAlignmentsFailBeforeTheBackend() {
    exact(InvalidValueException.class, () -> dev.allocate(specF32(16), 0));
    exact(InvalidValueException.class, () -> dev.allocate(specF32(16), 8192));
    exact(InvalidValueException.class, () -> dev.allocate(specF32(16), 32));
    exact(InvalidValueException.class, () -> dev.allocate(new Device.ObjectSpec(DType.F32, new long[] {16}, 4096, 48),
        64));
    assertEquals(List.of(), log());
  }

  @Test
  void allocationFailureIsOutOfMemoryOnce() {
    dev.run(h -> Native.sw_fake_device_arm_failure(h, 1)); // SW_FAKE_FAIL_ALLOCATION
    NativeOutOfMemoryException e = exact(NativeOutOfMemoryException.class, () -> dev.allocate(specF32(16), 64));
    assertTrue(e.getMessage().contains("device allocation failed"), e.getMessage());
    dev.allocate(specF32(16), 64).close();
  }

  @Test
  void synchronousRoundTripCopiesExactRanges() {
    try (DeviceAllocation a = dev.allocate(specF32(16), 64)) {
      int[] in = new int[24];
      for (int i = 0; i < 24; ++i) {
        in[i] = 100 + i;
      }
      CopyEvent ev = a.copyFromHost(16, bytes(in), false);
      assertEquals(new CopyEvent.Status(true, true), dev.query(ev));
      assertEquals(1, ev.generation());
      ByteBuffer out = ByteBuffer.allocateDirect(64);
      a.copyToHost(0, out, false);
      for (int i = 0; i < 64; ++i) {
        assertEquals(i >= 16 && i < 40 ? 100 + i - 16 : 0, out.get(i) & 0xff);
      }
      ByteBuffer part = ByteBuffer.allocateDirect(5);
      a.copyToHost(20, part, false);
      assertArrayEquals(new int[] {104, 105, 106, 107, 108}, unsigned(part));
      List<String> log = log();
      assertEquals("host_to_device alloc=1 offset=16 bytes=24 async=0", log.get(1));
      assertEquals("device_to_host alloc=1 offset=0 bytes=64 async=0", log.get(2));
      assertEquals("device_to_host alloc=1 offset=20 bytes=5 async=0", log.get(3));
    }
  }

  @Test
  void rangesAreCheckedBeforeTheBackend() {
    try (DeviceAllocation a = dev.allocate(specF32(16), 64)) {
      int before = log().size();
      exact(IndexOutOfRangeException.class, () -> a.copyFromHost(60, ByteBuffer.allocateDirect(8), false));
      exact(IndexOutOfRangeException.class, () -> a.copyFromHost(0, ByteBuffer.allocateDirect(65), false));
      exact(IndexOutOfRangeException.class, () -> a.copyToHost(65, ByteBuffer.allocateDirect(1), false));
      exact(InvalidValueException.class, () -> a.copyFromHost(0, ByteBuffer.allocateDirect(0), false));
      exact(InvalidValueException.class, () -> a.copyFromHost(0, ByteBuffer.allocate(4), false));
      assertEquals(before, log().size());
      a.copyFromHost(0, ByteBuffer.allocateDirect(64), false);
    }
  }

  @Test
  void anAsynchronousCopyReadsTheHostBytesOnlyAtCompletion() {
    try (DeviceAllocation a = dev.allocate(specF32(16), 64)) {
      ByteBuffer in = bytes(1, 2, 3, 4, 5, 6, 7, 8);
      CopyEvent ev = a.copyFromHost(8, in, true);
      assertEquals(new CopyEvent.Status(false, false), dev.query(ev));
      exact(WaitTimeoutException.class, () -> dev.await(ev, Duration.ofMillis(1)));
      in.put(0, (byte) 42); // the fake reads the bytes only when completing
      dev.run(h -> Native.fake_device_complete(h, ev.toArray()));
      assertEquals(new CopyEvent.Status(true, true), dev.query(ev));
      dev.await(ev, Duration.ZERO);
      ByteBuffer out = ByteBuffer.allocateDirect(8);
      a.copyToHost(8, out, false);
      assertEquals(42, out.get(0));
      assertEquals(8, out.get(7));
      assertEquals("host_to_device alloc=1 offset=8 bytes=8 async=1 event=" + ev.id(), log().get(1));
      assertEquals("complete event=" + ev.id(), log().get(2));
      exact(InvalidValueException.class, () -> dev.run(h -> Native.fake_device_complete(h, ev.toArray())));
    }
  }

  @Test
  void aFailedCopyIsAnIOErrorAndAViewDescribesTheMemory() {
    try (DeviceAllocation a = dev.allocate(specF32(16), 64)) {
      CopyEvent ev = a.copyToHost(0, ByteBuffer.allocateDirect(4), true);
      dev.run(h -> Native.sw_fake_device_arm_failure(h, 2)); // SW_FAKE_FAIL_COPY
      dev.run(h -> Native.fake_device_complete(h, ev.toArray()));
      StorageIOException e = exact(StorageIOException.class, () -> dev.query(ev));
      assertTrue(e.getMessage().contains("copy failed"), e.getMessage());
      exact(StorageIOException.class, () -> dev.await(ev, null));
      ByteBuffer floats = ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder());
      for (int i = 0; i < 16; ++i) {
        floats.putFloat(i * 4, i * 0.5f);
      }
      a.copyFromHost(0, floats, false);
      try (DeviceView v = a.view(DType.F32, 16)) {
        DeviceView.Info info = v.describe();
        assertEquals(DType.F32, info.dtype());
        assertArrayEquals(l(16), info.shape());
        assertArrayEquals(l(4), info.stridesBytes());
        assertTrue(info.pointer() != 0);
        assertEquals(7.5f, v.hostBuffer().getFloat(15 * 4));
        exact(InvalidStateException.class, a::free); // a live view is a use
      }
      exact(TypeMismatchException.class, () -> a.view(DType.F64, 16));
      exact(InvalidValueException.class, () -> a.view(DType.F32, 8));
      dev.run(h -> Native.sw_fake_device_arm_failure(h, 4)); // SW_FAKE_FAIL_VIEW
      exact(StorageIOException.class, () -> a.view(DType.F32, 16));
    }
  }

  @Test
  void computeUseRefusesFreeUntilItEnds() {
    try (DeviceAllocation a = dev.allocate(specF32(16), 64)) {
      a.beginCompute();
      InvalidStateException e = exact(InvalidStateException.class, a::free);
      assertTrue(e.getMessage().contains("in use"), e.getMessage());
      a.endCompute();
      a.free();
    }
  }

  @Test
  void aRestartMakesEveryOlderHandleStale() {
    DeviceAllocation a = dev.allocate(specF32(16), 64);
    DeviceView v = a.view(DType.F32, 16);
    CopyEvent done = a.copyFromHost(0, bytes(1, 2, 3, 4), false);
    CopyEvent pending = a.copyFromHost(0, bytes(1, 2, 3, 4), true);
    dev.restart();
    assertEquals(2, dev.generation());
    StaleHandleException e = exact(StaleHandleException.class, () -> dev.query(pending));
    assertTrue(e.getMessage().contains("generation 1"), e.getMessage());
    assertEquals(ErrorCode.STALE_HANDLE, e.code());
    exact(StaleHandleException.class, () -> dev.query(done));
    exact(StaleHandleException.class, () -> dev.await(pending, null));
    exact(StaleHandleException.class, a::free);
    exact(StaleHandleException.class, () -> a.copyToHost(0, ByteBuffer.allocateDirect(4), false));
    exact(StaleHandleException.class, () -> a.view(DType.F32, 16));
    exact(StaleHandleException.class, a::beginCompute);
    exact(StaleHandleException.class, v::describe);
    dev.restart();
    assertEquals(3, dev.generation());
    try (DeviceAllocation b = dev.allocate(specF32(16), 64)) {
      assertEquals(3, b.generation());
    }
    v.close();
    a.close();
  }

  @Test
  void aLostDeviceRestartsAndReportsDeviceLost() {
    DeviceAllocation a = dev.allocate(specF32(16), 64);
    dev.run(h -> Native.sw_fake_device_arm_failure(h, 8)); // SW_FAKE_FAIL_DEVICE_LOST
    DeviceLostException e = exact(DeviceLostException.class, () -> a.copyToHost(0, ByteBuffer.allocateDirect(4),
        false));
    assertTrue(e instanceof IllegalStateException);
    assertEquals(2, dev.generation());
    exact(StaleHandleException.class, a::free);
    a.close();
  }

  @Test
  void aHostDeviceCopiesOnTheLoop() {
    try (Device host = Device.host(rt); DeviceAllocation a = host.allocate(specF32(4), 16)) {
      assertEquals(Device.Kind.HOST, host.kind());
      CopyEvent ev = a.copyFromHost(0, bytes(9, 8, 7, 6), true);
      host.await(ev, null);
      assertTrue(host.query(ev).complete());
      ByteBuffer out = ByteBuffer.allocateDirect(4);
      a.copyToHost(0, out, false);
      assertArrayEquals(new int[] {9, 8, 7, 6}, unsigned(out));
      assertFalse(host.query(a.copyToHost(0, ByteBuffer.allocateDirect(4), false)).hostReleased() == false);
    }
  }
}
