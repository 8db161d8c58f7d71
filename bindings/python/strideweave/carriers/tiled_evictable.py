"""TiledEvictable: one logical tensor cut into tiles that live in a primary
(compute) tier or a secondary (storage) tier, move asynchronously, and are
gathered into compact tensors by projection."""
import numbers

from .. import _dtypes, _handles
from .._awaits import AwaitMove, AwaitProjection, AwaitResidency, AwaitResult
from .._checks import finite, integer
from .._coerce import as_tensor, type_name
from .._errors import StrideWeaveTypeError, StrideWeaveValueError
from .._lib import native as N
from .._tensor import Tensor
from .._tiles import LRUPolicy, ResidencyPlan, ResidencyPolicy, TileSelection, TileSet, planner
from ._carrier import Carrier

__all__ = [
    "TiledEvictable", "expert_ffn", "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy", "AwaitProjection",
    "AwaitResidency", "AwaitMove", "AwaitResult", "TiledResidencyFacet", "TileState",
]

_LOCATIONS = {N.SW_TILE_PRIMARY: "primary", N.SW_TILE_SECONDARY: "secondary", N.SW_TILE_IMPLICIT: "implicit",
              N.SW_TILE_INVALID: "invalid"}
_REDUCTIONS = {"replace": N.SW_SCATTER_REPLACE, "add": N.SW_SCATTER_ADD}
_ACTIVATIONS = {"silu": N.SW_UNARY_SILU, "gelu": N.SW_UNARY_GELU, "relu": N.SW_UNARY_RELU,
                "sigmoid": N.SW_UNARY_SIGMOID, "tanh": N.SW_UNARY_TANH}


class TileState:
    """Residency metadata of one tile: location in "primary", "secondary",
    "implicit" (a valid implicit zero) or "invalid"; valid; dirty."""

    __slots__ = ("location", "valid", "dirty")

    def __init__(self, location, valid, dirty):
        object.__setattr__(self, "location", location)
        object.__setattr__(self, "valid", valid)
        object.__setattr__(self, "dirty", dirty)

    def __setattr__(self, name, value):
        raise AttributeError("TileState is immutable")

    def __eq__(self, other):
        if not isinstance(other, TileState):
            return NotImplemented
        return (self.location, self.valid, self.dirty) == (other.location, other.valid, other.dirty)

    def __hash__(self):
        return hash((self.location, self.valid, self.dirty))

    def __repr__(self):
        return f"TileState(location={self.location!r}, valid={self.valid}, dirty={self.dirty})"


def _shape_arg(value, what):
    items = finite(value, what)
    return tuple(integer(v, f"{what} entry") for v in items)


def _tensor(value, what):
    return as_tensor(value, what)


def _reduction(value):
    """The C code of a scatter reduction name."""
    if not isinstance(value, str) or value not in _REDUCTIONS:
        raise StrideWeaveValueError(f"reduction must be 'replace' or 'add', not {value!r}")
    return _REDUCTIONS[value]


def _selection(value):
    if not isinstance(value, TileSelection):
        raise StrideWeaveTypeError(f"selection must be a TileSelection, not {type(value).__name__}")
    return value


@_handles.carrier_kind(N.SW_CARRIER_TILED)
class TiledEvictable(Carrier):
    """TiledEvictable(primary, secondary, grid_shape, tile_shape, *, residency_policy=None)

    `primary` is a compute carrier (CPU or Vulkan), `secondary` a storage carrier
    (Host, File, Zstd); each is empty or holds the full logical extent as a
    seed, tiles one after another in tile order, first mode fastest. Both
    are claimed by the TiledEvictable until its release()."""

    __slots__ = ("_primary", "_secondary", "_policy")

    def __init__(self, primary, secondary, grid_shape, tile_shape, *, residency_policy=None):
        if not isinstance(primary, Carrier):
            raise StrideWeaveTypeError(f"primary must be a Carrier, not {type(primary).__name__}")
        if not isinstance(secondary, Carrier):
            raise StrideWeaveTypeError(f"secondary must be a Carrier, not {type(secondary).__name__}")
        grid = _shape_arg(grid_shape, "grid_shape")
        tile = _shape_arg(tile_shape, "tile_shape")
        if len(grid) != len(tile):
            raise StrideWeaveValueError(f"grid_shape {grid} and tile_shape {tile} differ in rank")
        if residency_policy is None:
            native_policy = None
        elif isinstance(residency_policy, LRUPolicy):
            native_policy = residency_policy._h
        elif callable(getattr(residency_policy, "plan", None)):
            native_policy = planner(residency_policy)
        else:
            raise StrideWeaveTypeError(
                f"residency_policy must be None or a ResidencyPolicy (an object with a callable "
                f"plan(required, purpose)), not {type(residency_policy).__name__}")
        h = N.tiled_create(primary._h, secondary._h, grid, tile, native_policy)
        self._init(h, primary._rt)
        self._primary = primary
        self._secondary = secondary
        self._policy = residency_policy

    @classmethod
    def _adopt(cls, h, rt):
        obj = super()._adopt(h, rt)
        obj._primary = None
        obj._secondary = None
        obj._policy = None
        return obj

    # ---- structure ----

    @property
    def primary(self):
        """The primary (compute) carrier."""
        if self._primary is None:
            self._primary = _handles.adopt_carrier(N.sw_tiled_primary(self._h), self._rt)
        return self._primary

    @property
    def secondary(self):
        """The secondary (storage) carrier."""
        if self._secondary is None:
            self._secondary = _handles.adopt_carrier(N.sw_tiled_secondary(self._h), self._rt)
        return self._secondary

    @property
    def grid_shape(self):
        """The number of tiles along each axis."""
        return N.tiled_grid_shape(self._h)

    @property
    def tile_shape(self):
        """The shape of one tile."""
        return N.tiled_tile_shape(self._h)

    @property
    def logical_shape(self):
        """The shape of the whole logical tensor (grid times tile)."""
        return tuple(g * t for g, t in zip(self.grid_shape, self.tile_shape))

    @property
    def residency_policy(self):
        """The residency policy, or None."""
        return self._policy

    def full_tensor(self):
        """The full logical tensor: dense layout of logical_shape at offset 0."""
        t = Tensor._adopt(N.sw_tiled_full_tensor(self._h), self._rt)
        t._carrier = self
        return t

    # ---- residency ----

    def tile_state(self, coord):
        """The TileState (location, valid, dirty) of the tile at `coord`."""
        items = (coord,) if isinstance(coord, numbers.Integral) else finite(coord, "coord")
        coord = tuple(integer(c, "coord entry") for c in items)
        location, valid, dirty = N.tiled_tile_state(self._h, coord)
        return TileState(_LOCATIONS[location], valid, dirty)

    def _tiles(self, kind):
        return TileSet._adopt(N.sw_tiled_tiles(self._h, kind))

    @property
    def primary_tiles(self):
        """The TileSet of tiles resident in the primary tier."""
        return self._tiles(N.SW_TILES_PRIMARY)

    @property
    def secondary_tiles(self):
        """The TileSet of tiles held in the secondary tier."""
        return self._tiles(N.SW_TILES_SECONDARY)

    @property
    def valid_tiles(self):
        """The TileSet of tiles holding a value."""
        return self._tiles(N.SW_TILES_VALID)

    @property
    def dirty_tiles(self):
        """The TileSet of tiles whose primary copy is newer than the secondary one."""
        return self._tiles(N.SW_TILES_DIRTY)

    @staticmethod
    def _tile_set(tiles):
        if isinstance(tiles, TileSelection):
            return tiles.tile_set  # the spec accepts a selection as its tile set
        if not isinstance(tiles, TileSet):
            raise StrideWeaveTypeError(f"tiles must be a TileSet or TileSelection, not {type(tiles).__name__}")
        return tiles

    def _residency(self, tiles, evict, blocking):
        tiles = self._tile_set(tiles)
        result = N.tiled_residency(self._h, tiles._handle(), evict, blocking)
        return None if blocking else AwaitResidency._adopt(result, self._rt)

    def promote_async(self, tiles):
        """Starts making every tile valid on primary; returns AwaitResidency."""
        return self._residency(tiles, False, False)

    def prefetch_async(self, tiles):
        """promote_async for tiles expected to be needed soon (the next
        layer's predicted experts): the same request, but its reads from a
        file tier yield to those of requests something waits for
        (sw_tiled_prefetch_async). Returns AwaitResidency."""
        tiles = self._tile_set(tiles)
        return AwaitResidency._adopt(N.tiled_prefetch(self._h, tiles._handle()), self._rt)

    def evict_async(self, tiles):
        """Starts moving tiles to secondary (dirty values written first)."""
        return self._residency(tiles, True, False)

    def promote(self, tiles):
        """promote_async(tiles).wait(), with the GIL released throughout."""
        self._residency(tiles, False, True)

    def evict(self, tiles):
        """evict_async(tiles).wait(), with the GIL released throughout."""
        self._residency(tiles, True, True)

    # ---- data ----

    def project(self, tensor, selection, destination=None):
        """Starts gathering the selected tiles of the full `tensor` into a
        compact dense tensor; returns AwaitProjection."""
        tensor = _tensor(tensor, "tensor")
        selection = _selection(selection)
        if destination is not None:
            if isinstance(destination, TiledEvictable) or not isinstance(destination, Carrier):
                hint = ""
                if isinstance(destination, Tensor) or hasattr(type(destination), "__dlpack__"):
                    hint = ("; to project into an existing CPU buffer pass its carrier: "
                            "sw.from_dlpack(buffer).carrier (or sw.from_numpy(array).carrier), which shares "
                            "its memory")
                raise StrideWeaveTypeError(
                    f"destination must be an ordinary carrier of the primary tier's class, not "
                    f"{type_name(destination)}{hint}")
            dest_h = destination._h
        else:
            dest_h = None
        h = N.sw_tiled_project(self._h, tensor._h, selection._handle(), dest_h)
        return AwaitProjection._adopt(h, self._rt)

    def expert_matmul(self, experts, x, ids, gates=None, *, out_dtype=None):
        """Starts the expert-indexed matmul (the mixture-of-experts
        primitive) on this TiledEvictable of one expert per tile, grid
        (1, 1, E) and tile (K, N, 1); `experts` is its full tensor. `ids`
        (T, k) int32/int64 names token t's j-th expert; `x` is (T, K), shared
        by a token's choices, or (T, k, K). Without `gates` the result is
        (T, k, N), `x[t, (j,) :] @ W[ids[t, j]]`; with `gates` (T, k) it is
        (T, N), their gate-weighted sum over j. Each expert's rows are
        multiplied on its tile memory in place; missing experts are read
        while the resident ones compute. Differentiable in experts, x and
        gates. `out_dtype`: float32 for the f32 sums of half experts.
        Block-quantized experts (a GGUF file's stacked experts) are
        multiplied on their blocks: `x` of any float dtype, the result
        float32 (or `out_dtype` bfloat16/float16), not differentiable
        (docs/quantization.md). Returns an AwaitProjection."""
        experts = _tensor(experts, "experts")
        x = _tensor(x, "x")
        ids = _tensor(ids, "ids")
        gates = None if gates is None else _tensor(gates, "gates")
        code = _out_dtype_code(out_dtype, "expert_matmul")
        h = N.tiled_expert_matmul(self._h, experts._h, x._h, ids._h, None if gates is None else gates._h, code)
        return AwaitProjection._adopt(h, self._rt)

    def scatter(self, compact, template, selection, reduction="replace"):
        """Starts writing `compact` at the selected tiles of a fresh
        TiledEvictable shaped like `template`; returns AwaitMove."""
        compact = _tensor(compact, "compact")
        template = _tensor(template, "template")
        selection = _selection(selection)
        h = N.sw_tiled_scatter(self._h, compact._h, template._h, selection._handle(), _reduction(reduction))
        policy = self._policy

        def adopt_policy(result):
            carrier = result.carrier
            if isinstance(carrier, TiledEvictable) and carrier._policy is None:
                carrier._policy = policy

        return AwaitMove._adopt(h, self._rt, adopt_policy if policy is not None else None)

    def update_async(self, tensor, compact, selection, reduction="replace"):
        """Starts writing `compact` into the selected tiles of this carrier
        itself ("replace", or "add" for an optimiser step): a public write of
        the full `tensor`, no autograd. Returns an AwaitMove whose wait()
        returns None."""
        tensor = _tensor(tensor, "tensor")
        compact = _tensor(compact, "compact")
        selection = _selection(selection)
        h = N.sw_tiled_update_async(self._h, tensor._h, compact._h, selection._handle(), _reduction(reduction))
        return AwaitMove._adopt(h, self._rt)

    def require_facet(self, facet):
        if facet is TiledResidencyFacet:
            return _FACET
        return super().require_facet(facet)

    def __repr__(self):
        state = ", released" if self.is_released() else ""
        return (f"TiledEvictable(grid_shape={self.grid_shape}, tile_shape={self.tile_shape}, "
                f"dtype={self.dtype.name}{state})")


class TiledResidencyFacet:
    """The residency surface of a tiled carrier, as a facet:
    carrier.require_facet(TiledResidencyFacet).promote_async(carrier, tiles)."""

    __slots__ = ()

    @staticmethod
    def _carrier(carrier):
        if not isinstance(carrier, TiledEvictable):
            raise StrideWeaveTypeError(f"expected a TiledEvictable, not {type(carrier).__name__}")
        return carrier

    def promote_async(self, carrier, tiles):
        """Starts promoting `tiles` of `carrier`: an AwaitResidency."""
        return self._carrier(carrier).promote_async(tiles)

    def prefetch_async(self, carrier, tiles):
        """Starts prefetching `tiles` of `carrier` (TiledEvictable.prefetch_async)."""
        return self._carrier(carrier).prefetch_async(tiles)

    def evict_async(self, carrier, tiles):
        """Starts evicting `tiles` of `carrier`: an AwaitResidency."""
        return self._carrier(carrier).evict_async(tiles)

    def promote(self, carrier, tiles):
        """Promotes `tiles` of `carrier` and waits (returns None)."""
        return self._carrier(carrier).promote(tiles)

    def evict(self, carrier, tiles):
        """Evicts `tiles` of `carrier` and waits (returns None)."""
        return self._carrier(carrier).evict(tiles)


_FACET = TiledResidencyFacet()


def _out_dtype_code(out_dtype, op):
    """The dtype code of an expert op's out_dtype (0: the experts')."""
    if out_dtype is None:
        return 0
    if not isinstance(out_dtype, _dtypes.DType):
        raise StrideWeaveTypeError(f"{op}: out_dtype must be a strideweave dtype, not {type(out_dtype).__name__}")
    return out_dtype.code


def _experts_of(t, name):
    t = _tensor(t, name)
    te = t.carrier
    if not isinstance(te, TiledEvictable):
        raise StrideWeaveTypeError(
            f"expert_ffn: {name} must be the full tensor of a TiledEvictable, not a tensor on a {type(te).__name__}")
    return te, t


def expert_ffn(x, ids, gate, up, down, gates=None, *, activation="silu", out_dtype=None):
    """Starts the gated expert feed-forward of a mixture-of-experts layer:
    for token t's j-th choice e = ids[t, j], ``a = x[t] @ Gate[e]``,
    ``b = x[t] @ Up[e]``, ``h = act(a) * b``, ``Y[t, j] = h @ Down[e]``
    (Mixtral's ``w2(silu(w1 x) * w3 x)``: gate is w1, up w3, down w2).

    `gate`, `up` and `down` are the full tensors of TiledEvictables of one
    expert per tile: gate and up grid (1, 1, E), tile (H, F, 1); down grid
    (1, 1, E), tile (F, H, 1) (a Hugging Face checkpoint's per-expert
    tensors as they lie, see docs/moe-offload.md). With ``up=None``, `gate`
    is the fused gate_up of Hugging Face transformers 5 (``gate_up_proj``,
    torch shape (E, 2F, H), and ``down_proj`` (E, H, F)): grid (1, 1, E),
    tile (H, 2F, 1), whose first F output features are the gate's and the
    next F the up's (``gate, up = (x @ gate_up_proj[e].T).chunk(2, -1)``);
    each expert's two products are computed on the halves of its one tile
    in place, equal bit for bit to the three-TiledEvictable form on the same
    values. An odd second tile extent is a StrideWeaveValueError.

    `x` is (T, H), or (T, k, H) one row per choice; `ids` (T, k)
    int32/int64. Without `gates` the result is Y, (T, k, H); with `gates`
    (T, k) it is (T, H), the gate-weighted sum over j (in f32, rounded
    once). a, b, act(a), h and each Y[t, j] are rounded to the experts'
    dtype as the unfused layer rounds them. `activation`: "silu" (default),
    "gelu", "relu", "sigmoid" or "tanh". `out_dtype`: float32 keeps each
    expert's output and the sum of half experts unrounded. Block-quantized
    experts (one quantized dtype for all three) take `x` of any float
    dtype, keep a, b and h in float32 and give float32 (or `out_dtype`
    bfloat16/float16); they are not differentiable (docs/quantization.md).

    Each expert's products run on its tiles in place as soon as its inputs
    are there; a missing expert's gate (or gate_up), up and down tiles are
    read in that order, each product starting as its tile lands. Each
    TiledEvictable's policy is consulted with the experts the call uses.
    Under grad mode with an input requiring grad the unfused layer runs
    instead (blocking) and records its nodes (in the fused form, the gate_up
    expert matmul and its two halves as differentiable slices). Returns an
    AwaitProjection whose result is the tensor."""
    x = _tensor(x, "x")
    ids = _tensor(ids, "ids")
    gate_te, gate = _experts_of(gate, "gate")
    up_te, up = (None, None) if up is None else _experts_of(up, "up")
    down_te, down = _experts_of(down, "down")
    gates = None if gates is None else _tensor(gates, "gates")
    if not isinstance(activation, str) or activation not in _ACTIVATIONS:
        raise StrideWeaveValueError(
            f"expert_ffn: activation must be one of {', '.join(map(repr, _ACTIVATIONS))}, not {activation!r}")
    code = _out_dtype_code(out_dtype, "expert_ffn")
    h = N.tiled_expert_ffn(gate_te._h, gate._h, None if up is None else up_te._h, None if up is None else up._h,
                           down_te._h, down._h, x._h, ids._h, None if gates is None else gates._h,
                           _ACTIVATIONS[activation], code)
    return AwaitProjection._adopt(h, gate_te._rt)
