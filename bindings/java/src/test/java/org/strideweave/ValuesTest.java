package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** TileSelection, TileSet and ResidencyPlan: the spec's value scenarios. */
class ValuesTest extends Fixtures {
  static long[][] rows(List<long[]> coords) {
    return coords.toArray(new long[0][]);
  }

  @Test
  void selectThreeExpertsInRouterOrder() {
    TileSelection s = sel(l(2, 7, 19), l(0), l(0));
    assertArrayEquals(l(2, 7, 19), s.axis(0));
    assertArrayEquals(l(3, 1, 1), s.compactGridShape());
    assertEquals(3, s.rank());
    assertArrayEquals(new long[][] {{2, 0, 0}, {7, 0, 0}, {19, 0, 0}}, rows(s.coordinates()));
  }

  @Test
  void includeEveryRecombinedCorner() {
    TileSelection s = sel(l(0, 1), l(0, 1));
    assertArrayEquals(new long[][] {{0, 0}, {1, 0}, {0, 1}, {1, 1}}, rows(s.coordinates()));
    assertEquals(4, s.count());
  }

  @Test
  void enumerateAMultiAxisSelectionFirstModeFastest() {
    TileSelection s = sel(l(7, 2), l(4, 9));
    assertArrayEquals(new long[][] {{7, 4}, {2, 4}, {7, 9}, {2, 9}}, rows(s.coordinates()));
  }

  @Test
  void selectionTileSetHoldsItsCoordinatesInSetOrder() {
    TileSet t = sel(l(7, 2), l(4, 9)).tileSet();
    assertArrayEquals(new long[][] {{2, 4}, {7, 4}, {2, 9}, {7, 9}}, rows(t.coordinates()));
  }

  @Test
  void selectionValueErrors() {
    exact(InvalidValueException.class, () -> TileSelection.of());
    exact(InvalidValueException.class, () -> sel(l()));
    exact(InvalidValueException.class, () -> sel(l(1, 1)));
    exact(InvalidValueException.class, () -> sel(l(0), l(-1)));
  }

  @Test
  void selectionIsImmutableAndEqualByValue() {
    long[] axis = {3, 1};
    TileSelection a = TileSelection.of(axis);
    axis[0] = 9;
    assertArrayEquals(l(3, 1), a.axis(0));
    a.axis(0)[0] = 5;
    assertArrayEquals(l(3, 1), a.axis(0));
    TileSelection b = sel(l(3, 1));
    assertEquals(a, b);
    assertEquals(a.hashCode(), b.hashCode());
    assertNotEquals(a, sel(l(1, 3)));
    assertEquals("TileSelection[(3, 1)]", a.toString());
    assertEquals("TileSelection[(2, 7), (0,)]", sel(l(2, 7), l(0)).toString());
  }

  @Test
  void representANonProductCacheSet() {
    TileSet t = TileSet.of(l(0, 0), l(0, 1), l(1, 0));
    assertEquals(3, t.size());
    assertTrue(t.contains(1, 0));
    assertFalse(t.contains(1, 1));
  }

  @Test
  void tileSetOrdersFirstCoordinateFastest() {
    TileSet t = TileSet.of(l(1, 1), l(0, 1), l(1, 0), l(0, 0));
    assertArrayEquals(new long[][] {{0, 0}, {1, 0}, {0, 1}, {1, 1}}, rows(t.coordinates()));
    assertEquals("TileSet[(0, 0), (1, 0), (0, 1), (1, 1)]", t.toString());
    assertEquals("TileSet[(2,)]", tiles1(2).toString());
  }

  @Test
  void emptyTileSetIsRankAgnostic() {
    TileSet e = TileSet.of();
    assertEquals(0, e.rank());
    assertTrue(e.isEmpty());
    assertEquals(TileSet.empty(), e);
    assertEquals("TileSet[]", e.toString());
    assertEquals(tiles1(3), e.union(tiles1(3)));
  }

  @Test
  void tileSetValueErrors() {
    exact(InvalidValueException.class, () -> TileSet.of(l(0, 0), l(1)));
    exact(InvalidValueException.class, () -> TileSet.of(l(-1)));
    exact(InvalidValueException.class, () -> TileSet.of(l(2, 3), l(2, 3)));
  }

  @Test
  void tileSetValueSemantics() {
    TileSet a = TileSet.of(l(1), l(0));
    TileSet b = TileSet.of(l(0), l(1));
    assertEquals(a, b);
    assertEquals(a.hashCode(), b.hashCode());
    assertNotEquals(a, tiles1(0));
    assertEquals(tiles1(0, 1, 2), a.union(tiles1(2, 1)));
    long[] got = a.get(0);
    got[0] = 7;
    assertArrayEquals(l(0), a.get(0));
    exact(IndexOutOfRangeException.class, () -> a.get(2));
  }

  @Test
  void planDefaultsAndFields() {
    ResidencyPlan p = ResidencyPlan.of(null, null, null);
    assertEquals(TileSet.empty(), p.promote());
    assertEquals(TileSet.empty(), p.retain());
    assertEquals(TileSet.empty(), p.evict());
    ResidencyPlan q = ResidencyPlan.of(tiles1(0), tiles1(1), tiles1(2));
    assertEquals(tiles1(0), q.promote());
    assertEquals(tiles1(1), q.retain());
    assertEquals(tiles1(2), q.evict());
    assertEquals(q, ResidencyPlan.of(tiles1(0), tiles1(1), tiles1(2)));
    assertEquals(q.hashCode(), ResidencyPlan.of(tiles1(0), tiles1(1), tiles1(2)).hashCode());
    assertNotEquals(q, ResidencyPlan.promote(tiles1(0)));
    assertEquals("ResidencyPlan[promote=TileSet[(0,)], retain=TileSet[(1,)], evict=TileSet[(2,)]]", q.toString());
  }

  @Test
  void planRejectsATileInTwoFieldsAndMixedRanks() {
    exact(InvalidValueException.class, () -> ResidencyPlan.of(tiles1(0), null, tiles1(0)));
    exact(InvalidValueException.class, () -> ResidencyPlan.of(tiles1(0), TileSet.of(l(1, 1)), null));
  }

  @Test
  void theNativeRoundTripKeepsTheValue() {
    ResidencyPlan q = ResidencyPlan.of(TileSet.of(l(0, 2)), TileSet.of(l(1, 1)), null);
    long h = q.newHandle();
    try {
      assertEquals(q, ResidencyPlan.fromHandle(h));
    } finally {
      Native.sw_residency_plan_release(h);
    }
  }
}
