package org.strideweave;

import java.nio.ByteBuffer;

/**
 * A copy event ({@code sw_copy_event_t}): the generation and id of one copy. An asynchronous
 * copy's event also keeps its Java buffer reachable: keep the event until
 * {@link Device#query} reports the host bytes released.
 */
public final class CopyEvent {
  private final long generation;
  private final long id;
  @SuppressWarnings("unused") // keeps the host bytes of an asynchronous copy reachable
  private final ByteBuffer host;

  CopyEvent(long[] event, ByteBuffer host) {
    this.generation = event[0];
    this.id = event[1];
    this.host = host;
  }

  /**
   * An event of a generation and id (to ask about an event by its numbers).
   *
   * @param generation the device generation
   * @param id the event id
   */
  public CopyEvent(long generation, long id) {
    this.generation = generation;
    this.id = id;
    this.host = null;
  }

  long[] toArray() {
    return new long[] {generation, id};
  }

  /**
   * The device generation the copy was made in.
   *
   * @return the generation
   */
  public long generation() {
    return generation;
  }

  /**
   * The copy's id.
   *
   * @return the id
   */
  public long id() {
    return id;
  }

  /** Value equality of generation and id. */
  @Override
  public boolean equals(Object o) {
    return o instanceof CopyEvent && ((CopyEvent) o).generation == generation && ((CopyEvent) o).id == id;
  }

  @Override
  public int hashCode() {
    return Long.hashCode(generation) * 31 + Long.hashCode(id);
  }

  @Override
  public String toString() {
    return "CopyEvent[generation=" + generation + ", id=" + id + "]";
  }

  /**
   * Where a copy stands.
   *
   * @param hostReleased the host bytes may be reused or freed
   * @param complete the copy is done (for a device-to-host copy, the host bytes are valid)
   */
  public record Status(boolean hostReleased, boolean complete) {}
}
