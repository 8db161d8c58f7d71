"""Tile values (TileSelection, TileSet, ResidencyPlan), the ResidencyPolicy
protocol and the built-in LRU policy.

The values are immutable, hashable and equal by value; their arguments are
checked (strideweave._checks) before any C call.
"""
import itertools
from typing import Protocol, runtime_checkable

from ._checks import finite, integer
from ._errors import StrideWeaveTypeError, StrideWeaveValueError
from ._lib import native as N


def _fmf_key(coord):
    return coord[::-1]


class _Frozen:
    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, name, value):
        object.__setattr__(self, name, value)

    def __del__(self):
        try:
            h = self._h
        except AttributeError:
            return
        try:
            self._release(h)
        except Exception:
            pass


class TileSet(_Frozen):
    """An immutable finite set of full-rank tile coordinates, ordered first
    coordinate fastest (sorted by reversed tuple)."""

    __slots__ = ("_coordinates", "_h")
    _release = staticmethod(N.sw_tile_set_release)

    def __init__(self, coordinates=()):
        entries = finite(coordinates, "TileSet coordinates")
        coords = []
        for i, entry in enumerate(entries):
            items = finite(entry, f"TileSet coordinate {i}")
            coords.append(tuple(integer(c, f"TileSet coordinate {i} component") for c in items))
        self._set("_coordinates", self._check(coords))

    @staticmethod
    def _check(coords):
        ranks = {len(c) for c in coords}
        if len(ranks) > 1:
            raise StrideWeaveValueError(f"TileSet coordinates mix ranks {sorted(ranks)}")
        if ranks == {0}:
            raise StrideWeaveValueError("a TileSet coordinate must have at least one component")
        for c in coords:
            if any(v < 0 for v in c):
                raise StrideWeaveValueError(f"TileSet coordinate {c} has a negative component")
        ordered = sorted(coords, key=_fmf_key)
        for a, b in zip(ordered, ordered[1:]):
            if a == b:
                raise StrideWeaveValueError(f"TileSet coordinate {a} occurs twice")
        return tuple(ordered)

    @classmethod
    def _of(cls, coords):
        """From coordinates already checked and ordered."""
        obj = object.__new__(cls)
        obj._set("_coordinates", coords)
        return obj

    @classmethod
    def _from_handle(cls, h):
        """A TileSet with the coordinates of a borrowed sw_tile_set_t."""
        return cls._of(N.tile_set_coordinates(h))

    @classmethod
    def _adopt(cls, h):
        """A TileSet with the coordinates of a new sw_tile_set_t reference."""
        obj = cls._of(N.tile_set_coordinates(h))
        obj._set("_h", h)
        return obj

    def _handle(self):
        try:
            return self._h
        except AttributeError:
            coords = self._coordinates
            rank = len(coords[0]) if coords else 0
            h = N.tile_set_create([v for c in coords for v in c], rank)
            self._set("_h", h)
            return h

    @property
    def coordinates(self):
        """The tile coordinates, sorted."""
        return self._coordinates

    @property
    def rank(self):
        """The coordinates' rank; None for the empty, rank-agnostic set."""
        return len(self._coordinates[0]) if self._coordinates else None

    def __len__(self):
        return len(self._coordinates)

    def __iter__(self):
        return iter(self._coordinates)

    def __contains__(self, coord):
        return tuple(coord) in set(self._coordinates) if isinstance(coord, (tuple, list)) else False

    def __eq__(self, other):
        if not isinstance(other, TileSet):
            return NotImplemented
        return self._coordinates == other._coordinates

    def __hash__(self):
        return hash(("TileSet", self._coordinates))

    def __repr__(self):
        return f"TileSet(coordinates={self._coordinates!r})"

    def union(self, other):
        """The tiles in this set or `other`."""
        return TileSet(set(self._coordinates) | set(_as_tile_set(other)._coordinates))

    def difference(self, other):
        """The tiles of this set not in `other`."""
        return TileSet(set(self._coordinates) - set(_as_tile_set(other)._coordinates))

    def intersection(self, other):
        """The tiles in both this set and `other`."""
        return TileSet(set(self._coordinates) & set(_as_tile_set(other)._coordinates))

    __or__ = union
    __sub__ = difference
    __and__ = intersection


class TileSelection(_Frozen):
    """An ordered Cartesian product of per-axis tile coordinates, enumerated
    first mode fastest, gathered into one compact tensor by projection."""

    __slots__ = ("_per_axis", "_coordinates", "_tile_set", "_h")
    _release = staticmethod(N.sw_tile_selection_release)

    def __init__(self, per_axis):
        axes = finite(per_axis, "per_axis")
        raw = [finite(axis, f"per_axis[{i}]") for i, axis in enumerate(axes)]
        checked = tuple(tuple(integer(c, f"per_axis[{i}] coordinate") for c in axis)
                        for i, axis in enumerate(raw))
        if not checked:
            raise StrideWeaveValueError("a TileSelection needs at least one axis")
        for i, axis in enumerate(checked):
            if not axis:
                raise StrideWeaveValueError(f"per_axis[{i}] is empty")
            if any(c < 0 for c in axis):
                raise StrideWeaveValueError(f"per_axis[{i}] has a negative coordinate")
            if len(set(axis)) != len(axis):
                raise StrideWeaveValueError(f"per_axis[{i}] repeats a coordinate")
        self._set("_per_axis", checked)

    def _handle(self):
        try:
            return self._h
        except AttributeError:
            h = N.tile_selection_create(self._per_axis)
            self._set("_h", h)
            return h

    @property
    def per_axis(self):
        """The selected tile indices, one tuple per grid axis."""
        return self._per_axis

    @property
    def rank(self):
        """The number of grid axes."""
        return len(self._per_axis)

    @property
    def compact_grid_shape(self):
        """The grid shape of the compact tensor a projection of this selection makes."""
        return tuple(len(axis) for axis in self._per_axis)

    @property
    def coordinates(self):
        """Every source coordinate, first axis fastest, each axis in its order."""
        try:
            return self._coordinates
        except AttributeError:
            coords = tuple(c[::-1] for c in itertools.product(*reversed(self._per_axis)))
            self._set("_coordinates", coords)
            return coords

    @property
    def tile_set(self):
        """The TileSet of every tile coordinate the selection covers."""
        try:
            return self._tile_set
        except AttributeError:
            ts = TileSet._of(tuple(sorted(self.coordinates, key=_fmf_key)))
            self._set("_tile_set", ts)
            return ts

    def __len__(self):
        n = 1
        for axis in self._per_axis:
            n *= len(axis)
        return n

    def __eq__(self, other):
        if not isinstance(other, TileSelection):
            return NotImplemented
        return self._per_axis == other._per_axis

    def __hash__(self):
        return hash(("TileSelection", self._per_axis))

    def __repr__(self):
        return f"TileSelection(per_axis={self._per_axis!r})"


class ResidencyPlan(_Frozen):
    """One immutable residency decision: three disjoint TileSets."""

    __slots__ = ("_promote", "_retain", "_evict", "_h")
    _release = staticmethod(N.sw_residency_plan_release)

    def __init__(self, promote=None, retain=None, evict=None):
        fields = {}
        for name, value in (("promote", promote), ("retain", retain), ("evict", evict)):
            if value is None:
                value = _EMPTY
            elif not isinstance(value, TileSet):
                raise StrideWeaveTypeError(f"ResidencyPlan {name} must be a TileSet or None, "
                                           f"not {type(value).__name__}")
            fields[name] = value
        ranks = {s.rank for s in fields.values() if s.rank is not None}
        if len(ranks) > 1:
            raise StrideWeaveValueError(f"ResidencyPlan fields mix ranks {sorted(ranks)}")
        seen = {}
        for name, value in fields.items():
            for c in value:
                if c in seen:
                    raise StrideWeaveValueError(f"tile {c} occurs in both {seen[c]} and {name}")
                seen[c] = name
        self._set("_promote", fields["promote"])
        self._set("_retain", fields["retain"])
        self._set("_evict", fields["evict"])

    def _handle(self):
        try:
            return self._h
        except AttributeError:
            h = N.sw_residency_plan_create(self._promote._handle(), self._retain._handle(),
                                           self._evict._handle())
            self._set("_h", h)
            return h

    @property
    def promote(self):
        """The TileSet the plan promotes."""
        return self._promote

    @property
    def retain(self):
        """The TileSet the plan keeps resident."""
        return self._retain

    @property
    def evict(self):
        """The TileSet the plan evicts."""
        return self._evict

    def __eq__(self, other):
        if not isinstance(other, ResidencyPlan):
            return NotImplemented
        return (self._promote, self._retain, self._evict) == (other._promote, other._retain, other._evict)

    def __hash__(self):
        return hash(("ResidencyPlan", self._promote, self._retain, self._evict))

    def __repr__(self):
        return f"ResidencyPlan(promote={self._promote!r}, retain={self._retain!r}, evict={self._evict!r})"


_EMPTY = TileSet._of(())


def _as_tile_set(tiles):
    if isinstance(tiles, TileSet):
        return tiles
    if isinstance(tiles, TileSelection):
        return tiles.tile_set
    raise StrideWeaveTypeError(f"expected a TileSet or TileSelection, not {type(tiles).__name__}")


PURPOSES = ("operation", "projection", "scatter", "backward")


@runtime_checkable
class ResidencyPolicy(Protocol):
    """Anything with plan(required: TileSet, purpose: str) -> ResidencyPlan.

    purpose is one of "operation", "projection", "scatter", "backward". It is
    called on the requesting thread before any transfer; its exceptions reach
    the caller unchanged. A request commits as a whole or not at all: its
    promotions, evictions and result appear together once everything
    succeeded, and nothing of it happens when it fails."""

    def plan(self, required: TileSet, purpose: str) -> ResidencyPlan:
        """A ResidencyPlan for the tiles `required` by `purpose` ("project", "scatter", ...)."""
        ...


class LRUPolicy:
    """The built-in policy: at most a budget of tiles primary, least recently
    used evicted first, prefetch hints promoted while the budget allows
    (sw_lru_policy_*). Runs in C: no Python call per request.

    The budget is `budget_tiles` tiles, or `budget_bytes` bytes of tile
    memory (the whole tiles that fit, fixed when a TiledEvictable attaches);
    give exactly one. It holds for every request: a request needing more
    tiles than fit reads the rest from the secondary tier for itself only
    (``stats()["transient"]``), ``promote`` makes room or raises
    StrideWeaveValueError when asked for more tiles than the budget, and
    writes to the full tensor go through to the secondary tier. One policy
    serves one TiledEvictable at a time."""

    __slots__ = ("_h", "__weakref__")

    def __init__(self, budget_tiles=None, *, budget_bytes=None):
        if (budget_tiles is None) == (budget_bytes is None):
            raise StrideWeaveValueError("give exactly one of budget_tiles and budget_bytes")
        tiles = 0 if budget_tiles is None else integer(budget_tiles, "budget_tiles")
        nbytes = 0 if budget_bytes is None else integer(budget_bytes, "budget_bytes")
        if budget_tiles is not None and tiles < 1:
            raise StrideWeaveValueError(f"budget_tiles must be at least 1, got {tiles}")
        if budget_bytes is not None and nbytes < 1:
            raise StrideWeaveValueError(f"budget_bytes must be at least 1, got {nbytes}")
        self._h = N.lru_policy_create(tiles, nbytes)

    @property
    def budget_tiles(self):
        """The budget in tiles (0 for a byte budget not attached yet)."""
        return N.sw_lru_policy_budget_tiles(self._h)

    def __del__(self):
        try:
            N.sw_lru_policy_release(self._h)
        except Exception:
            pass

    def hint(self, tiles):
        """Tiles expected soon; replaces earlier hints."""
        N.sw_lru_policy_hint(self._h, _as_tile_set(tiles)._handle())

    def stats(self):
        """{"requests", "hits", "misses", "promoted", "evicted", "transient"}
        counters of committed requests."""
        return N.lru_policy_stats(self._h)

    def plan(self, required, purpose):
        """The plan the policy would make for `required` now. No request
        carries it out, so the policy's view and statistics do not change."""
        if not isinstance(required, TileSet):
            raise StrideWeaveTypeError(f"required must be a TileSet, not {type(required).__name__}")
        if purpose not in PURPOSES:
            raise StrideWeaveValueError(f"purpose must be one of {PURPOSES}, not {purpose!r}")
        h = N.lru_policy_plan(self._h, required._handle(), PURPOSES.index(purpose) + 1)
        try:
            return ResidencyPlan(TileSet._adopt(N.sw_residency_plan_promote(h)),
                                 TileSet._adopt(N.sw_residency_plan_retain_set(h)),
                                 TileSet._adopt(N.sw_residency_plan_evict(h)))
        finally:
            N.sw_residency_plan_release(h)

    def __repr__(self):
        return f"<strideweave.LRUPolicy {self.stats()}>"


def planner(policy):
    """The callable the native trampoline calls for a Python policy."""

    def plan(required_handle, purpose):
        required = TileSet._from_handle(required_handle)
        result = policy.plan(required, purpose)
        if not isinstance(result, ResidencyPlan):
            raise StrideWeaveTypeError(f"{type(policy).__name__}.plan returned {type(result).__name__}, "
                                       "not a ResidencyPlan")
        h = result._handle()
        N.sw_residency_plan_retain(h)  # the library takes this reference over
        return h

    return plan
