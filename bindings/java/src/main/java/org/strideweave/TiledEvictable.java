package org.strideweave;

import java.util.Objects;

/**
 * A TiledEvictable (a carrier of kind {@link CarrierKind#TILED}): one logical tensor of shape
 * {@code gridShape * tileShape}, cut into tiles that live in a primary tier (a compute carrier:
 * CPU or Vulkan) or a secondary tier (host, file or zstd), move asynchronously under a
 * {@link ResidencyPolicy}, are gathered into compact tensors by {@link #project}, scattered back
 * by {@link #scatter} and {@link #updateAsync}, take part in autograd, and never lose a dirty
 * value. Both tiers are claimed by it (owned, not publicly mutable) and disposed by its
 * {@link #dispose()}, which fails with {@link InvalidStateException} while work involving it is
 * pending. Thread-safe: requests from several threads are serialised, and each commits as a
 * whole or not at all.
 *
 * <pre>{@code
 * try (Carrier cpu = Carrier.cpu(rt, DType.F32, 0);
 *      Carrier file = Carrier.file(rt, DType.F32, 64L * 1024 * 1024, null);
 *      LruPolicy lru = LruPolicy.create(16);
 *      TiledEvictable experts = TiledEvictable.create(cpu, file, new long[] {64, 1, 1},
 *          new long[] {1, 1024, 1024}, lru);
 *      Tensor w = experts.fullTensor();
 *      AwaitProjection pending = experts.project(w,
 *          TileSelection.of(new long[] {2, 7, 19}, new long[] {0}, new long[] {0}), null)) {
 *   Tensor compact = pending.get(); // (3, 1024, 1024)
 * }
 * }</pre>
 */
public final class TiledEvictable extends Carrier {
  private final ResidencyPolicy policy;

  TiledEvictable(long handle, ResidencyPolicy policy) {
    super(handle);
    this.policy = policy;
  }

  /**
   * A TiledEvictable over two tiers, each empty or holding the full logical extent as a seed
   * (tiles one after another in tile-ordinal order, each first mode fastest): a full primary
   * makes every tile primary; a full secondary every tile secondary; both full, primary and
   * dirty; both empty, invalid.
   *
   * @param primary an empty or full compute carrier (CPU or Vulkan)
   * @param secondary an empty or full storage carrier of the same dtype
   * @param gridShape tiles per mode
   * @param tileShape extents of one tile, of the grid's rank
   * @param policy a {@link ResidencyPolicy}, an {@link LruPolicy}, or null for none
   * @return the TiledEvictable
   * @throws TypeMismatchException for wrong carrier kinds or dtypes
   * @throws InvalidValueException for shapes
   * @throws InvalidStateException for disposed or owned tiers
   */
  public static TiledEvictable create(Carrier primary, Carrier secondary, long[] gridShape, long[] tileShape,
                                      ResidencyPolicy policy) {
    Objects.requireNonNull(primary, "primary");
    Objects.requireNonNull(secondary, "secondary");
    return primary.call(p -> secondary.call(s -> {
      if (policy instanceof LruPolicy) {
        LruPolicy lru = (LruPolicy) policy;
        return lru.call(l -> new TiledEvictable(Native.tiled_create(p, s, gridShape.clone(), tileShape.clone(), l,
            null), policy));
      }
      return new TiledEvictable(Native.tiled_create(p, s, gridShape.clone(), tileShape.clone(), 0, policy), policy);
    }));
  }

  /**
   * The policy given to {@link #create}; null without one, or for an object made from a
   * tensor's carrier.
   *
   * @return the policy
   */
  public ResidencyPolicy residencyPolicy() {
    return policy;
  }

  /**
   * Whether a residency policy was given at creation.
   *
   * @return true with a policy
   */
  public boolean hasPolicy() {
    return call(h -> {
      boolean[] out = new boolean[1];
      Native.sw_tiled_has_policy(h, out);
      return out[0];
    });
  }

  /**
   * The full logical tensor: the dense layout of the logical shape at offset 0.
   *
   * @return a new tensor object
   */
  public Tensor fullTensor() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tiled_full_tensor(h, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * The grid's rank.
   *
   * @return the rank
   */
  public int rank() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tiled_rank(h, out);
      return (int) out[0];
    });
  }

  /**
   * Tiles per mode.
   *
   * @return the grid shape
   */
  public long[] gridShape() {
    return call(Native::tiled_grid_shape);
  }

  /**
   * The extents of one tile.
   *
   * @return the tile shape
   */
  public long[] tileShape() {
    return call(Native::tiled_tile_shape);
  }

  /**
   * The logical tensor's shape, {@code gridShape * tileShape} mode by mode.
   *
   * @return the logical shape
   */
  public long[] logicalShape() {
    long[] g = gridShape();
    long[] t = tileShape();
    for (int i = 0; i < g.length; ++i) {
      g[i] *= t[i];
    }
    return g;
  }

  /**
   * The primary tier (a new Java object for it).
   *
   * @return the carrier
   */
  public Carrier primary() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tiled_primary(h, out);
      return Carrier.adopt(out[0]);
    });
  }

  /**
   * The secondary tier (a new Java object for it).
   *
   * @return the carrier
   */
  public Carrier secondary() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tiled_secondary(h, out);
      return Carrier.adopt(out[0]);
    });
  }

  /**
   * One tile's residency metadata.
   *
   * @param coord the tile coordinate
   * @return its state
   */
  public TileState tileState(long... coord) {
    int[] v = call(h -> Native.tiled_tile_state(h, coord.clone()));
    return new TileState(TileState.Location.values()[v[0] - 1], v[1] != 0, v[2] != 0);
  }

  private TileSet tiles(int kind) {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tiled_tiles(h, kind, out);
      try {
        return TileSet.fromHandle(out[0]);
      } finally {
        Native.sw_tile_set_release(out[0]);
      }
    });
  }

  /**
   * The tiles whose value is in the primary tier.
   *
   * @return the set
   */
  public TileSet primaryTiles() {
    return tiles(1);
  }

  /**
   * The tiles whose value is in the secondary tier only.
   *
   * @return the set
   */
  public TileSet secondaryTiles() {
    return tiles(2);
  }

  /**
   * The tiles holding a readable value.
   *
   * @return the set
   */
  public TileSet validTiles() {
    return tiles(3);
  }

  /**
   * The primary tiles whose value is not yet in the secondary tier.
   *
   * @return the set
   */
  public TileSet dirtyTiles() {
    return tiles(4);
  }

  private long residency(TileSet tiles, boolean evict, boolean blocking) {
    Objects.requireNonNull(tiles, "tiles");
    return call(h -> {
      long s = tiles.newHandle();
      try {
        return Native.tiled_residency(h, s, evict, blocking);
      } finally {
        Native.sw_tile_set_release(s);
      }
    });
  }

  /**
   * Starts promoting {@code tiles} to the primary tier; every tile becomes valid on primary.
   * Atomic and idempotent; no autograd node.
   *
   * @param tiles the tiles
   * @return the RESIDENCY await
   * @throws InvalidStateException for an invalid tile, a disposed carrier, or a tile covered
   *     by another incomplete residency request
   */
  public AwaitResidency promoteAsync(TileSet tiles) {
    return new AwaitResidency(residency(tiles, false, false));
  }

  /**
   * {@link #promoteAsync} for tiles expected to be needed soon (the next layer's predicted
   * experts): the same request, but its reads from a file tier yield to those of requests
   * something waits for ({@code sw_tiled_prefetch_async}).
   *
   * @param tiles the tiles
   * @return the RESIDENCY await
   * @throws InvalidStateException as {@link #promoteAsync}
   */
  public AwaitResidency prefetchAsync(TileSet tiles) {
    Objects.requireNonNull(tiles, "tiles");
    return new AwaitResidency(
        call(
            h -> {
              long s = tiles.newHandle();
              try {
                return Native.tiled_prefetch(h, s);
              } finally {
                Native.sw_tile_set_release(s);
              }
            }));
  }

  /**
   * Starts evicting {@code tiles}: dirty values are written to the secondary tier before
   * primary storage is dropped, after work that still needs a tile.
   *
   * @param tiles the tiles
   * @return the RESIDENCY await
   * @throws InvalidStateException for a dirty tile and a read-only secondary, a disposed
   *     carrier, or a tile covered by another incomplete residency request
   */
  public AwaitResidency evictAsync(TileSet tiles) {
    return new AwaitResidency(residency(tiles, true, false));
  }

  /**
   * {@link #promoteAsync} followed by the wait.
   *
   * @param tiles the tiles
   */
  public void promote(TileSet tiles) {
    residency(tiles, false, true);
  }

  /**
   * {@link #evictAsync} followed by the wait.
   *
   * @param tiles the tiles
   */
  public void evict(TileSet tiles) {
    residency(tiles, true, true);
  }

  /**
   * {@link #promoteAsync(TileSet)} of a selection's tiles.
   *
   * @param selection the tiles
   * @return the RESIDENCY await
   */
  public AwaitResidency promoteAsync(TileSelection selection) {
    return promoteAsync(selection.tileSet());
  }

  /**
   * {@link #evictAsync(TileSet)} of a selection's tiles.
   *
   * @param selection the tiles
   * @return the RESIDENCY await
   */
  public AwaitResidency evictAsync(TileSelection selection) {
    return evictAsync(selection.tileSet());
  }

  /**
   * Gathers the selected tiles of the full tensor into a compact dense tensor of shape
   * {@code compactGridShape * tileShape}, tiles in selection order. Starts every transfer and
   * gather it can before returning. With grad mode on and a tensor requiring grad, the result
   * records one gather node whose backward scatter-adds into a fresh TiledEvictable gradient.
   *
   * @param tensor the full tensor of this carrier (tile-footprint compatible)
   * @param selection the tiles
   * @param destination null (a fresh carrier of the primary tier's kind) or an empty or large
   *     enough, live, mutable carrier of the primary tier's kind and the dtype
   * @return the PROJECTION await
   * @throws TypeMismatchException for a tensor of another carrier or a wrong destination kind
   * @throws InvalidValueException for a selection of the wrong rank or range, a too small
   *     destination, or incompatible footprints
   * @throws InvalidStateException when disposed, for a conflicting residency request or an
   *     invalid tile
   */
  public AwaitProjection project(Tensor tensor, TileSelection selection, Carrier destination) {
    Objects.requireNonNull(tensor, "tensor");
    Objects.requireNonNull(selection, "selection");
    return call(h -> tensor.call(t -> {
      long d = beginOrZero(destination);
      long s = selection.newHandle();
      try {
        long[] out = new long[1];
        Native.sw_tiled_project(h, t, s, d, out);
        return new AwaitProjection(out[0]);
      } finally {
        Native.sw_tile_selection_release(s);
        endIfNotNull(destination);
      }
    }));
  }

  /**
   * Starts the expert-indexed matmul, the mixture-of-experts primitive: every token multiplied
   * by the experts it was routed to, on the experts' tile memory in place. This TiledEvictable
   * holds one expert per tile: grid {@code (1, 1, E)} and tile {@code (K, N, 1)}, tile {@code e}
   * holding expert {@code e}'s {@code (K, N)} matrix {@code W_e} first mode fastest (a row-major
   * {@code (E, N, K)} weight file, one {@code nn.Linear(K, N)} per expert, is this tensor as it
   * lies; see {@code docs/moe-offload.md}). The result, a CPU tensor of the experts' dtype, is
   * <ul>
   *   <li>{@code gates == null}: {@code (T, k, N)}, {@code Y[t, j, :] = x[t, (j,) :] @ W_{ids[t, j]}};
   *   <li>{@code gates (T, k)}: {@code (T, N)}, the sum over {@code j} of
   *       {@code gates[t, j] * Y[t, j, :]}.
   * </ul>
   * Products accumulate in f32 (f64 for f64 experts), the gated sum too, and the result is
   * rounded once. As a projection it consults the policy with the experts the call uses (purpose
   * PROJECTION), reads missing experts from the secondary tier while the resident ones are
   * computed, and pins the experts until the commit (evictions wait, {@link #dispose()} is
   * refused while it is pending). With grad mode on and experts, x or gates requiring grad, the
   * result records one node whose backward gives x and the gates their gradients and the experts
   * a tile-sparse TiledEvictable gradient holding the used experts' tiles. Every error below is
   * raised before any work, and changes no state.
   *
   * @param experts the full tensor of this carrier ({@link #fullTensor()})
   * @param x a CPU tensor of the experts' dtype: {@code (T, K)}, shared by a token's {@code k}
   *     choices, or {@code (T, k, K)}, one row per choice
   * @param ids a CPU {@code (T, k)} {@link DType#I32} or {@link DType#I64} tensor of expert ids,
   *     token {@code t}'s {@code j}-th choice at {@code (t, j)}
   * @param gates null, or a CPU {@code (T, k)} float tensor of gate weights
   * @return the PROJECTION await, whose result is the tensor
   * @throws IndexOutOfRangeException for an id outside {@code [0, E)} (naming token and slot)
   * @throws TypeMismatchException for a non-CPU x, ids or gates, for dtypes (x not of the
   *     experts' dtype, ids not i32 or i64, gates not float), or for experts not of this carrier
   * @throws InvalidValueException for a geometry other than grid {@code (1, 1, E)} and tile
   *     {@code (K, N, 1)}, a view instead of the full tensor, or the shapes of x, ids or gates
   * @throws UnsupportedFeatureException for a primary tier other than CPU
   * @throws InvalidStateException when disposed, for an expert owned by a residency request or
   *     an invalid expert tile
   */
  public AwaitProjection expertMatmul(Tensor experts, Tensor x, Tensor ids, Tensor gates) {
    Objects.requireNonNull(experts, "experts");
    Objects.requireNonNull(x, "x");
    Objects.requireNonNull(ids, "ids");
    return call(h -> experts.call(e -> x.call(xh -> ids.call(i -> {
      long g = beginOrZero(gates);
      try {
        long[] out = new long[1];
        Native.sw_tiled_expert_matmul(h, e, xh, i, g, null, out);
        return new AwaitProjection(out[0]);
      } finally {
        endIfNotNull(gates);
      }
    }))));
  }

  /**
   * {@link #expertMatmul(Tensor, Tensor, Tensor, Tensor)} without gates: the result is
   * {@code (T, k, N)}, one row per token and choice.
   *
   * @param experts the full tensor of this carrier
   * @param x {@code (T, K)} or {@code (T, k, K)}, of the experts' dtype
   * @param ids {@code (T, k)} i32 or i64 expert ids
   * @return the PROJECTION await
   */
  public AwaitProjection expertMatmul(Tensor experts, Tensor x, Tensor ids) {
    return expertMatmul(experts, x, ids, null);
  }

  /**
   * Starts the gated expert feed-forward of a mixture-of-experts layer, its experts in one call
   * ({@code sw_tiled_expert_ffn}): for token {@code t}'s {@code j}-th choice
   * {@code e = ids[t, j]},
   * <pre>{@code
   * a = x[t] @ Gate_e,  b = x[t] @ Up_e,  h = act(a) * b,  Y[t, j] = h @ Down_e
   * }</pre>
   * (Mixtral's {@code w2(silu(w1 x) * w3 x)}: gate is {@code w1}, up {@code w3}, down
   * {@code w2}). {@code gate}, {@code up} and {@code down} are the full tensors
   * ({@link #fullTensor()}) of three TiledEvictables of one expert per tile, all of one float
   * dtype with a CPU primary tier: gate and up with grid {@code (1, 1, E)} and tile
   * {@code (H, F, 1)}, down with grid {@code (1, 1, E)} and tile {@code (F, H, 1)} (a row-major
   * {@code (E, F, H)} gate or up file and {@code (E, H, F)} down file are these tensors as they
   * lie; see {@code docs/moe-offload.md}); each one's TiledEvictable is its tensor's carrier.
   * With {@code up} null, {@code gate} is the fused gate_up of Hugging Face transformers 5
   * ({@code gate_up_proj}, torch shape {@code (E, 2F, H)}): tile {@code (H, 2F, 1)}, whose first
   * {@code F} output features are the gate's and the next {@code F} the up's; both products are
   * computed on the halves of its one tile in place, equal bit for bit to the three-matrix form,
   * and the call is two requests (gate_up, down) instead of three. The result, a CPU tensor, is
   * <ul>
   *   <li>{@code gates == null}: {@code Y}, {@code (T, k, H)};
   *   <li>{@code gates (T, k)}: {@code (T, H)}, the sum over {@code j} of
   *       {@code gates[t, j] * Y[t, j]}.
   * </ul>
   * Values are rounded where the unfused layer ({@link #expertMatmul} of gate and up,
   * {@code sw_unary} of the activation, {@code sw_binary} MUL, then {@link #expertMatmul} of
   * down) rounds them: {@code a}, {@code b}, {@code act(a)} and {@code h} to the experts' dtype,
   * each {@code Y[t, j]} to the result's dtype, and the gated sum (in f32, f64 for f64 experts,
   * over {@code j} in order) once; the products accumulate as for {@link #expertMatmul}.
   *
   * <p>Each expert's three products run on its tiles' memory in place as soon as its inputs are
   * there: resident experts are computed at once, and a missing expert's gate, up and down tiles
   * are read in that order, each product starting as its tile lands. Each TiledEvictable is one
   * request as for {@link #expertMatmul}: its policy is consulted with the experts the call uses
   * (purpose PROJECTION), and its experts are pinned while its request is pending (evictions
   * wait, {@link #dispose()} is refused); the three commit before the returned await completes,
   * and a failure in any of the three fails the call. When every expert the call uses is
   * resident in all three and no plan moves anything, the call computes on the calling thread
   * and returns its await already done. With grad mode on and an experts tensor, x or gates
   * requiring grad, the call computes the unfused layer itself (blocking, the await done on
   * return), which records the nodes of those ops. Every error below is raised before any work,
   * and changes no state.
   *
   * @param x a CPU tensor of the experts' dtype: {@code (T, H)}, shared by a token's {@code k}
   *     choices, or {@code (T, k, H)}, one row per choice
   * @param ids a CPU {@code (T, k)} {@link DType#I32} or {@link DType#I64} tensor of expert ids,
   *     token {@code t}'s {@code j}-th choice at {@code (t, j)}
   * @param gate the full tensor of the gate projections' TiledEvictable, tile {@code (H, F, 1)}
   * @param up the full tensor of the up projections' TiledEvictable, tile {@code (H, F, 1)}, or
   *     null for the fused form ({@code gate} then the gate_up experts, tile {@code (H, 2F, 1)})
   * @param down the full tensor of the down projections' TiledEvictable, tile {@code (F, H, 1)}
   * @param options the gate weights ({@code gates}, null or a CPU {@code (T, k)} float tensor),
   *     the activation and the result's dtype; see {@link ExpertFfnOptions}
   * @return the PROJECTION await, whose result is the tensor
   * @throws IndexOutOfRangeException for an id outside {@code [0, E)} (naming token and slot)
   * @throws TypeMismatchException for a non-CPU x, ids or gates, for dtypes (x not of the
   *     experts' dtype, ids not i32 or i64, gates not float, an {@code outDtype} other than the
   *     experts' or f32), for experts of different dtypes, or for an experts tensor not on a
   *     TiledEvictable
   * @throws InvalidValueException for a geometry other than the above (naming the
   *     TiledEvictable at fault; a fused gate_up whose second tile extent is odd), a view instead
   *     of the full tensor, or the shapes of x, ids or gates
   * @throws UnsupportedFeatureException for a primary tier other than CPU
   * @throws InvalidStateException when disposed, for an expert owned by a residency request or
   *     an invalid expert tile
   */
  public static AwaitProjection expertFfn(Tensor x, Tensor ids, Tensor gate, Tensor up, Tensor down,
                                          ExpertFfnOptions options) {
    Objects.requireNonNull(x, "x");
    Objects.requireNonNull(ids, "ids");
    Objects.requireNonNull(gate, "gate");
    Objects.requireNonNull(down, "down");
    Objects.requireNonNull(options, "options");
    Tensor gates = options.gates();
    Activation activation = options.activation();
    int out = options.outDtype() == null ? 0 : options.outDtype().value();
    return x.call(xh -> ids.call(i -> gate.call(g -> down.call(d -> {
      long u = beginOrZero(up); // 0: the fused form
      try {
        long gh = beginOrZero(gates);
        try {
          return new AwaitProjection(Native.tiled_expert_ffn(g, u, d, xh, i, gh, activation.value(), out));
        } finally {
          endIfNotNull(gates);
        }
      } finally {
        endIfNotNull(up);
      }
    }))));
  }

  /**
   * {@link #expertFfn(Tensor, Tensor, Tensor, Tensor, Tensor, ExpertFfnOptions)} with the
   * defaults ({@link ExpertFfnOptions#DEFAULTS}): no gates, so the result is {@code Y},
   * {@code (T, k, H)}, one row per token and choice; SiLU (SwiGLU); the experts' dtype.
   *
   * @param x {@code (T, H)} or {@code (T, k, H)}, of the experts' dtype
   * @param ids {@code (T, k)} i32 or i64 expert ids
   * @param gate the gate projections' full tensor (or the fused gate_up experts')
   * @param up the up projections' full tensor, or null for the fused form
   * @param down the down projections' full tensor
   * @return the PROJECTION await
   */
  public static AwaitProjection expertFfn(Tensor x, Tensor ids, Tensor gate, Tensor up, Tensor down) {
    return expertFfn(x, ids, gate, up, down, ExpertFfnOptions.DEFAULTS);
  }

  /**
   * {@link #expertFfn(Tensor, Tensor, Tensor, Tensor, Tensor, ExpertFfnOptions)} with gate
   * weights, SiLU and the experts' dtype.
   *
   * @param x {@code (T, H)} or {@code (T, k, H)}, of the experts' dtype
   * @param ids {@code (T, k)} i32 or i64 expert ids
   * @param gate the gate projections' full tensor, or the fused gate_up experts'
   * @param up the up projections' full tensor, or null for the fused form
   * @param down the down projections' full tensor
   * @param gates null for {@code Y (T, k, H)}, or {@code (T, k)} gate weights for the
   *     {@code (T, H)} gated sum
   * @return the PROJECTION await
   * @deprecated use {@link #expertFfn(Tensor, Tensor, Tensor, Tensor, Tensor, ExpertFfnOptions)}
   *     with {@code ExpertFfnOptions.builder().gates(gates).build()}
   */
  @Deprecated
  public static AwaitProjection expertFfn(Tensor x, Tensor ids, Tensor gate, Tensor up, Tensor down, Tensor gates) {
    return expertFfn(x, ids, gate, up, down, new ExpertFfnOptions(gates, Activation.SILU, null));
  }

  /**
   * {@link #expertFfn(Tensor, Tensor, Tensor, Tensor, Tensor, ExpertFfnOptions)} with the
   * options given one by one.
   *
   * @param x {@code (T, H)} or {@code (T, k, H)}, of the experts' dtype
   * @param ids {@code (T, k)} i32 or i64 expert ids
   * @param gate the gate projections' full tensor, or the fused gate_up experts'
   * @param up the up projections' full tensor, or null for the fused form
   * @param down the down projections' full tensor
   * @param gates null, or {@code (T, k)} gate weights
   * @param activation the activation of the gate product
   * @param outDtype the result's dtype, or null for the experts'
   * @return the PROJECTION await
   * @deprecated use {@link #expertFfn(Tensor, Tensor, Tensor, Tensor, Tensor, ExpertFfnOptions)}
   */
  @Deprecated
  public static AwaitProjection expertFfn(Tensor x, Tensor ids, Tensor gate, Tensor up, Tensor down, Tensor gates,
                                          Activation activation, DType outDtype) {
    Objects.requireNonNull(x, "x");
    Objects.requireNonNull(ids, "ids");
    Objects.requireNonNull(gate, "gate");
    Objects.requireNonNull(down, "down");
    return expertFfn(x, ids, gate, up, down, new ExpertFfnOptions(gates, activation, outDtype));
  }

  /**
   * Writes {@code compact} at the selected tiles of a fresh TiledEvictable with this one's
   * geometry and tier kinds, returned by the await as its full tensor. REPLACE takes compact's
   * values; ADD adds them to the template's. The selected tiles are valid and dirty, the others
   * invalid. Neither input changes. Differentiable.
   *
   * @param compact a CPU tensor of the selected region's shape and the dtype
   * @param template the full tensor of this carrier
   * @param selection the tiles
   * @param reduction REPLACE or ADD
   * @return the MOVE await
   */
  public AwaitMove scatter(Tensor compact, Tensor template, TileSelection selection, ScatterReduction reduction) {
    Objects.requireNonNull(compact, "compact");
    Objects.requireNonNull(template, "template");
    return call(h -> compact.call(c -> template.call(t -> {
      long s = selection.newHandle();
      try {
        long[] out = new long[1];
        Native.sw_tiled_scatter(h, c, t, s, reduction.value(), out);
        return new AwaitMove(out[0]);
      } finally {
        Native.sw_tile_selection_release(s);
      }
    })));
  }

  /**
   * Writes {@code compact} into the selected tiles of this carrier itself: REPLACE stores it,
   * ADD adds it. A public write of the full tensor: one version step, the tiles become primary,
   * valid and dirty. No autograd.
   *
   * @param tensor the full tensor of this carrier
   * @param compact the values, of the selected region's shape
   * @param selection the tiles
   * @param reduction REPLACE or ADD
   * @return the MOVE await, without a result
   * @throws InvalidStateException while a selected tile is in use by pending work or covered
   *     by a residency request
   */
  public AwaitMove updateAsync(Tensor tensor, Tensor compact, TileSelection selection, ScatterReduction reduction) {
    Objects.requireNonNull(tensor, "tensor");
    Objects.requireNonNull(compact, "compact");
    return call(h -> tensor.call(t -> compact.call(c -> {
      long s = selection.newHandle();
      try {
        long[] out = new long[1];
        Native.sw_tiled_update_async(h, t, c, s, reduction.value(), out);
        return new AwaitMove(out[0]);
      } finally {
        Native.sw_tile_selection_release(s);
      }
    })));
  }
}
