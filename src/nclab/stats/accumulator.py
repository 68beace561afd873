"""The accumulator protocol shared by every streaming statistic of nclab (in the spirit of torchmetrics' ``Metric``).

A streaming accumulator reads batches once (:meth:`Accumulator.update`) and keeps float64 / int64 tensors whose
combination over disjoint data is exact. Each subclass *declares* its state in ``__init__`` with
:meth:`Accumulator.add_state` (name, shape, dtype and how the part reduces); the base class then supplies, once
for all of them, :meth:`~Accumulator.merge`, :meth:`~Accumulator.all_reduce` (``torch.distributed``),
:meth:`~Accumulator.reset`, :meth:`~Accumulator.state_dict` / :meth:`~Accumulator.load_state_dict` and
:meth:`~Accumulator.save` / :meth:`~Accumulator.load`.

Reductions
----------
``"sum"``
    Combined by addition (counts, sums of moments).
``"shift"``
    A per-class reference point (row k belongs to class k), fixed at the first sample of the class and never
    changed while the class has samples; the ``"sum"`` moments are taken about it, so that nearly collapsed
    features far from the origin keep their digits. On :meth:`~Accumulator.merge` this side's shift of a class
    is kept (the other's is adopted for classes only the other has seen); on :meth:`~Accumulator.all_reduce`
    every rank takes the shift of the lowest rank that saw the class (:func:`agree_on_shifts`). In both cases
    the subclass' :meth:`~Accumulator._reshift` re-expresses its moments about the common shifts exactly, after
    which every ``"sum"`` part is a plain sum.

An accumulator may also hold *buffers* (constant arrays it was built from, e.g. the class means an NCC pass
measures against: equal on both sides of a merge, and saved with the state) and *children* (accumulators it
owns, e.g. the two ends of :class:`~nclab.stats.PairedClassStats`), which every operation visits after the
accumulator's own state.

Distributed reduction
---------------------
:meth:`~Accumulator.all_reduce` replaces every rank's state by the sum over the ranks, in place: it cannot be
undone, and it must happen once per pass. Before anything is combined, the ranks exchange a short record of their
accumulators (one ``all_gather`` of at most :data:`AGREEMENT_BYTES` bytes: the class name, the binding
configuration of :meth:`~Accumulator._config` such as ``K``, ``d``, ``track`` or ``index``, a digest
of each buffer, the same for each child, and whether the accumulator was reduced already); if any field differs
between ranks, every rank raises the same ``ValueError`` naming the field, its values and the ranks that hold
them, and no state changes. A second ``all_reduce`` of the same accumulator would count the other ranks' samples
again: every rank raises ``RuntimeError`` instead (as torchmetrics' ``_is_synced`` guard refuses a second sync;
refusing rather than skipping, because a skipped call cannot tell a repeated call from new local data that the
other ranks never receive). After a reduction the accumulator holds the statistics of every rank: ``update`` and
``merge`` still add to them on this rank alone (say, data only this process sees), and the accumulator stays
reduced; :meth:`~Accumulator.reset` (or loading a state) makes it a fresh, unreduced accumulator. The mark
follows the object, not its saved state: a state saved after ``all_reduce`` loads as unreduced. Subclasses do
not override ``all_reduce`` (the protocol refuses such a class): their preparation goes into
:meth:`~Accumulator._before_reduce`.

Persistence
-----------
``save(path)`` writes ``.npz`` (default) or ``.safetensors`` (needs the ``safetensors`` package), atomically
(:func:`nclab.io.atomic.atomic_write_bytes`). Metadata (JSON-encoded strings): ``kind`` (the class name),
``format_version`` (:data:`FORMAT_VERSION`), the configuration (e.g. ``K``, ``d``, ``track``) and
``has_state``, ``sha256``, and ``provenance`` when :meth:`~Accumulator.save` was given where the statistics come
from (``run_id``, ``epoch``, ``layer``, ``split``; files without it still load, with an empty
:attr:`~Accumulator.provenance`); arrays: ``state__<name>``, ``buffer__<name>``, and the same keys prefixed
``<child>__`` for each child.

Threads
-------
One accumulator may be shared by several threads: ``update``, ``merge``, ``reset``, ``state_dict``,
``load_state_dict`` and ``all_reduce`` of one object run one at a time under its lock (a reentrant
``threading.RLock`` in the base class; each subclass' own definitions of these methods are wrapped when the class
is created, so every accumulator has it). Concurrent updates therefore lose nothing; their order, and so the
rounding of the sums, is the order in which the threads get the lock. ``merge(other)`` does not lock ``other``:
do not update ``other`` while it is merged. Read results (metrics, ``means``) after the updating threads are
joined. The lock is not part of the state: pickling and ``copy.deepcopy`` give a copy with its own lock. An
uncontended lock costs about 0.1 microsecond per call, against milliseconds for an update (docs/stats.md).

Verified files
--------------
``sha256`` is :func:`nclab.io.integrity.arrays_sha256` of the other metadata and every array: the checksum is
inside the file, so a file and its checksum cannot disagree after a crash. ``load`` checks, before anything
changes and in this order: that the file reads (not truncated, empty or of another format), the kind, the
version, the configuration, every array's presence, shape and dtype, the checksum, then the values: every
floating-point state finite, every state declared ``nonnegative`` (counts, sums of squares) ``>= 0``, and the
subclass' cross-checks (:meth:`Accumulator._check_consistency`, e.g. a class with no samples has zero sums;
correct predictions never exceed the count). Any failure raises one
:class:`~nclab.io.integrity.CorruptFileError` (a ``ValueError``) naming the file and the problem.
:meth:`Accumulator.load_state_dict` runs the same checks but the checksum. ``Accumulator.load(path)`` on the
base class reads any accumulator file, as the class its ``kind`` names.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import threading
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
import torch

from nclab.io.atomic import atomic_write_bytes
from nclab.io.integrity import CorruptFileError, arrays_sha256

__all__ = ["AGREEMENT_BYTES", "FORMAT_VERSION", "Accumulator", "Reduction", "StateSpec", "agree_on_shifts"]

#: Version of the state-dict and file layout written by :meth:`Accumulator.save` (3: files carry ``sha256``).
FORMAT_VERSION = 3

#: Size of the record each rank sends before :meth:`Accumulator.all_reduce` combines anything (a record that does
#: not fit is sent as its sha256, which still detects a difference but cannot name the field).
AGREEMENT_BYTES = 2048

Reduction = Literal["sum", "shift"]
A = TypeVar("A", bound="Accumulator")

_META = "meta__"
_CHECKSUM = "sha256"
#: Metadata key of the record of where the statistics come from (:meth:`Accumulator.save`'s keywords).
_PROVENANCE = "provenance"
#: Configuration keys of states written before the size arguments took the letters of docs/conventions.md
#: (``num_classes`` -> ``K``, ``dim`` -> ``d``): :meth:`Accumulator.load` and :meth:`~Accumulator.load_state_dict`
#: read them as the new keys, so that older files and checkpoints still load.
_OLD_CONFIG_KEYS = {"num_classes": "K", "dim": "d"}


@dataclass(frozen=True)
class StateSpec:
    """One declared part of an accumulator's state (:meth:`Accumulator.add_state`).

    Parameters
    ----------
    shape : tuple of int
        Shape of the state tensor, e.g. ``(K, d)``.
    dtype : torch.dtype
        Its dtype (float64 for sums, int64 for counts).
    reduce : {"sum", "shift"}
        How two states combine (see the module documentation).
    nonnegative : bool, default False
        A count or a sum of nonnegative terms: a loaded state with a negative entry is refused.

    Examples
    --------
    >>> StateSpec((3,), torch.float64, "sum").numpy_dtype
    dtype('float64')
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    reduce: Reduction
    nonnegative: bool = False

    @property
    def numpy_dtype(self) -> np.dtype:
        return torch.empty(0, dtype=self.dtype).numpy().dtype


def agree_on_shifts(
    seen: torch.Tensor, shifts: tuple[torch.Tensor, ...], group: Any = None
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Per-class shifts common to every rank of ``torch.distributed``: those of the lowest rank that saw the class.

    A MIN all-reduce of the owner, then a SUM of the owners' shifts, zeros elsewhere.

    Parameters
    ----------
    seen : torch.Tensor of bool, shape (K,)
        Whether this rank saw each class.
    shifts : tuple of torch.Tensor, each of shape (K, ...)
        This rank's shift states (row k belongs to class k).
    group : torch.distributed process group, optional
        Default: the world group.

    Returns
    -------
    seen_anywhere : torch.Tensor of bool, shape (K,)
        Whether any rank saw each class.
    common : tuple of torch.Tensor
        The common shifts, shaped as ``shifts`` (zero for classes nobody saw).

    Examples
    --------
    A group of one process keeps its own shifts:

    >>> import torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> seen, (common,) = agree_on_shifts(torch.tensor([True, False]), (torch.ones(2, 3),))
    >>> seen.tolist(), common.tolist()
    ([True, False], [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    >>> dist.destroy_process_group()
    """
    import torch.distributed as dist

    rank, world = dist.get_rank(group), dist.get_world_size(group)
    owner = torch.where(seen, rank, world).to(torch.int64)  # `world` means nobody
    dist.all_reduce(owner, op=dist.ReduceOp.MIN, group=group)
    mine = (owner == rank)[:, None]
    common = tuple(torch.where(mine, s, torch.zeros_like(s)) for s in shifts)
    for c in common:
        dist.all_reduce(c, op=dist.ReduceOp.SUM, group=group)
    return owner < world, common


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """``method`` run while holding its accumulator's lock (``self._lock``, reentrant)."""

    @functools.wraps(method)
    def run(self: Accumulator, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    run._nclab_locked = True  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


class Accumulator(ABC):
    """Base class of nclab's streaming accumulators; see the module documentation for the protocol.

    Subclasses call ``super().__init__(device)`` and :meth:`add_state` in ``__init__``, implement :meth:`update`,
    :meth:`_config` and :meth:`_from_config`, and, when they declare ``"shift"`` states, :meth:`_shift_counts`
    and :meth:`_reshift`.

    Parameters
    ----------
    device : str or torch.device, optional
        Where the state lives. Default: allocated lazily, on the device of the first batch.

    Examples
    --------
    A counter declares one state; merge, state_dict, save and load come from the base class:

    >>> class Count(Accumulator):
    ...     def __init__(self, device=None):
    ...         super().__init__(device)
    ...         self.add_state("n", (), torch.int64, nonnegative=True)
    ...
    ...     def _config(self):
    ...         return {}
    ...
    ...     @classmethod
    ...     def _from_config(cls, config, buffers, device):
    ...         return cls(device)
    ...
    ...     def update(self, x):
    ...         if self._state is None:
    ...             self._allocate(torch.device("cpu"))
    ...         self._state["n"] += len(x)
    ...         return self
    >>> total = Count().update([1, 2]).merge(Count().update([3]))
    >>> int(total.state_dict()["state"]["n"])
    3
    """

    #: Names of the attributes holding child accumulators (visited after the own state, in this order).
    children: ClassVar[tuple[str, ...]] = ()
    #: Readable names of buffers, for error messages.
    buffer_labels: ClassVar[Mapping[str, str]] = {}

    #: Methods that change or read the whole state, run under the accumulator's lock (see "Threads" in the module
    #: documentation); a subclass' own definitions of them are wrapped when the class is created.
    _LOCKED: ClassVar[tuple[str, ...]] = ("update", "merge", "reset", "state_dict", "load_state_dict")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "all_reduce" in vars(cls):  # every reduction goes through the one cross-rank check and double-call guard
            raise TypeError(f"{cls.__name__} overrides all_reduce; put its preparation into _before_reduce instead")
        for name in cls._LOCKED:
            method = vars(cls).get(name)
            if callable(method) and not getattr(method, "_nclab_locked", False):
                setattr(cls, name, _locked(method))

    def __init__(self, device: str | torch.device | None = None) -> None:
        #: Serialises update / merge / reset / state_dict / load_state_dict / all_reduce of this object across
        #: threads (reentrant: an update may merge, a parent visits its children). Not pickled (see __getstate__).
        self._lock = threading.RLock()
        self._specs: dict[str, StateSpec] = {}
        self._state: dict[str, torch.Tensor] | None = None
        self._home: torch.device | None = torch.device(device) if device is not None else None
        self._device: torch.device | None = self._home
        self._reduced = False  # this state is already the sum over the ranks (see all_reduce)
        #: Where the statistics come from, as recorded in the file they were loaded from (``run_id``, ``epoch``,
        #: ``layer``, ``split``: see :meth:`save`); empty for an accumulator built in memory or an older file.
        self.provenance: dict[str, Any] = {}

    @property
    def kind(self) -> str:
        """The name of the accumulator class, as written to files."""
        return type(self).__name__

    def __getstate__(self) -> dict[str, Any]:
        """The object's attributes without its lock (a lock cannot be pickled or deep-copied; a copy gets its own,
        see :meth:`__setstate__`)."""
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ declaration
    def add_state(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: torch.dtype = torch.float64,
        reduce: Reduction = "sum",
        *,
        nonnegative: bool = False,
    ) -> None:
        """Declare a state tensor ``name`` of ``shape`` and ``dtype``, combined by ``reduce`` (``"sum"`` or
        ``"shift"``); ``nonnegative=True`` for counts and sums of nonnegative terms (a loaded state with a
        negative entry is refused). Floating-point states must be finite on load."""
        if reduce not in ("sum", "shift"):
            raise ValueError(f"reduce must be 'sum' or 'shift', got {reduce!r}")
        if "__" in name or name in self._specs:
            raise ValueError(f"state name {name!r} is taken or contains '__'")
        self._specs[name] = StateSpec(tuple(int(s) for s in shape), dtype, reduce, bool(nonnegative))

    # ------------------------------------------------------------------ subclass hooks
    @abstractmethod
    def update(self, *args: Any, **kwargs: Any) -> Accumulator:
        """Accumulate one batch; returns ``self``."""

    @abstractmethod
    def _config(self) -> dict[str, Any]:
        """JSON-able configuration (e.g. ``K``, ``d``): must match to merge or load."""

    @classmethod
    @abstractmethod
    def _from_config(
        cls: type[A], config: Mapping[str, Any], buffers: Mapping[str, np.ndarray], device: torch.device | None
    ) -> A:
        """An empty accumulator of this configuration and these buffers (what :meth:`load` fills)."""

    def _buffers(self) -> dict[str, np.ndarray]:
        """Constant arrays the accumulator was built from: equal on both sides of a merge, saved with the state."""
        return {}

    def _shift_counts(self) -> torch.Tensor:
        """Samples per class ``(K,)``: a shift row is set exactly where its class has samples."""
        raise NotImplementedError(f"{self.kind} declares shift states but no _shift_counts")

    def _reshift(
        self, state: Mapping[str, torch.Tensor], counts: torch.Tensor, to: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The ``"sum"`` parts of ``state`` (taken about ``state``'s shifts, ``counts`` samples per class)
        re-expressed exactly about the shifts ``to``; parts that do not depend on the shift may be left out."""
        raise NotImplementedError(f"{self.kind} declares shift states but no _reshift")

    def _check_consistency(self, sd: Mapping[str, Any]) -> None:  # noqa: B027 (optional hook)
        """Cross-checks of the values of a state dict whose structure is valid and whose states are finite and
        sign-correct (e.g. children that must agree, a class with no samples has zero sums); raise
        ``ValueError``."""

    def _before_reduce(self) -> None:  # noqa: B027 (optional hook)
        """Called by :meth:`all_reduce` after the ranks agreed, before this accumulator's state is combined (e.g. to
        fold rows still buffered into the state)."""

    def _changed(self) -> None:  # noqa: B027 (optional hook)
        """Called after merge, all_reduce, load_state_dict and reset (e.g. to drop cached derived values)."""

    def _allocate(self, device: torch.device) -> None:
        """Zero state on ``device``; subclasses extend it to move their own tensors there."""
        self._state = {n: torch.zeros(s.shape, dtype=s.dtype, device=device) for n, s in self._specs.items()}
        self._device = device

    # ------------------------------------------------------------------ helpers
    @property
    def device(self) -> torch.device | None:
        """Where the state lives (None until the first batch, unless a device was given)."""
        return self._device

    def _shift_names(self) -> list[str]:
        return [n for n, s in self._specs.items() if s.reduce == "shift"]

    def _child(self, name: str) -> Accumulator:
        child: Accumulator = getattr(self, name)
        return child

    def _check_mergeable(self, other: Accumulator) -> None:
        if type(other) is not type(self):
            raise TypeError(f"can only merge {self.kind}, got {type(other).__name__}")
        mine, theirs = self._config(), other._config()
        for key in (*mine, *(k for k in theirs if k not in mine)):  # a key only one side sets differs too
            if mine.get(key) != theirs.get(key):
                raise ValueError(f"incompatible {self.kind}: {key}={mine.get(key)!r} vs {key}={theirs.get(key)!r}")
        a, b = self._buffers(), other._buffers()
        for key in (*a, *(k for k in b if k not in a)):
            if key not in a or key not in b or not np.array_equal(a[key], b[key]):
                raise ValueError(f"incompatible {self.kind}: different {self.buffer_labels.get(key, key)}")

    # ------------------------------------------------------------------ combination
    @_locked
    def merge(self: A, other: A) -> A:
        """Add the statistics of ``other`` (built on disjoint data, same configuration) into ``self``, exactly;
        returns ``self``."""
        self._check_mergeable(other)
        if other._state is not None:
            if self._state is None:
                assert other._device is not None  # set with its state
                self._allocate(other._device)
            st = self._state
            assert st is not None
            theirs = {k: v.to(self._device) for k, v in other._state.items()}
            shifts = self._shift_names()
            if shifts:
                n_theirs = other._shift_counts().to(self._device)
                adopt = (self._shift_counts() == 0) & (n_theirs > 0)
                for s in shifts:
                    st[s][adopt] = theirs[s][adopt]
                theirs.update(self._reshift(theirs, n_theirs, {s: st[s] for s in shifts}))
            for name, spec in self._specs.items():
                if spec.reduce == "sum":
                    st[name] += theirs[name]
        for c in self.children:
            self._child(c).merge(other._child(c))
        self._reduced = self._reduced or other._reduced  # the other ranks' samples are in here now
        self._changed()
        return self

    @_locked
    def all_reduce(self: A, group: Any = None) -> A:
        """Sum the statistics of every rank of ``torch.distributed`` in place, exactly (returns ``self``).

        First the ranks check that they hold the same kind of accumulator with the same configuration and that
        none of them reduced it already (see the module documentation; ``ValueError`` or ``RuntimeError`` on every
        rank, before any state changes). Ranks may have seen different classes: each class is re-expressed about
        the shift of the lowest rank that saw it, after which every ``"sum"`` part is a plain SUM all-reduce.
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(f"{self.kind}.all_reduce needs an initialised torch.distributed process group")
        self._check_ranks_agree(group)
        self._reduce(group)
        return self

    def _reduce(self, group: Any) -> None:
        """The reduction proper, of this accumulator and its children (which the agreement check covered)."""
        import torch.distributed as dist

        if self._state is None:
            self._allocate(self._device or torch.device("cpu"))
        self._before_reduce()
        st = self._state
        assert st is not None
        shifts = self._shift_names()
        if shifts:
            counts = self._shift_counts()
            _, common = agree_on_shifts(counts > 0, tuple(st[s] for s in shifts), group)
            to = dict(zip(shifts, common, strict=True))
            st.update(self._reshift(st, counts, to))
            st.update(to)
        for name, spec in self._specs.items():
            if spec.reduce == "sum":
                dist.all_reduce(st[name], op=dist.ReduceOp.SUM, group=group)
        for c in self.children:
            self._child(c)._reduce(group)
        self._reduced = True
        self._changed()

    def _agreement_record(self) -> dict[str, Any]:
        """What every rank must share before a reduction: the kind, the binding configuration, a digest of each
        buffer, the same for each child (``child.field``), and whether this state was reduced already."""
        record: dict[str, Any] = {"kind": self.kind, **self._config()}
        for key, value in self._buffers().items():
            arr = np.ascontiguousarray(value)
            digest = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode() + arr.tobytes()).hexdigest()[:16]
            record[self.buffer_labels.get(key, key)] = f"sha256:{digest}"
        for c in self.children:
            record.update({f"{c}.{k}": v for k, v in self._child(c)._agreement_record().items()})
        record["reduced"] = self._reduced
        return record

    def _check_ranks_agree(self, group: Any) -> None:
        """One all_gather of every rank's :meth:`_agreement_record`; every rank raises the same error on a
        difference, so that no rank waits in a collective that the others never enter."""
        import torch.distributed as dist

        data = json.dumps(self._agreement_record(), sort_keys=True).encode()
        if len(data) > AGREEMENT_BYTES:
            data = json.dumps({"record sha256": hashlib.sha256(data).hexdigest()}).encode()
        mine = torch.zeros(AGREEMENT_BYTES, dtype=torch.uint8, device=self._device or torch.device("cpu"))
        mine[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        world = dist.get_world_size(group)
        gathered = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(gathered, mine, group=group)
        records = [json.loads(bytes(t.cpu().numpy()).rstrip(b"\0")) for t in gathered]
        ranks = [r if group is None else dist.get_global_rank(group, r) for r in range(world)]
        # the kind first (other fields mean nothing across kinds), then the configuration, the reduced mark last
        fields = sorted({k for rec in records for k in rec}, key=lambda k: (k != "kind", k == "reduced", k))
        for field in fields:
            holders: dict[str, list[int]] = {}
            for rank, rec in zip(ranks, records, strict=True):
                holders.setdefault(json.dumps(rec.get(field)), []).append(rank)
            if field == "reduced":
                done = holders.get("true", [])
                if done:
                    raise RuntimeError(
                        f"{self.kind}.all_reduce: the statistics on {_ranks(done)} are already the sum over the "
                        f"ranks (all_reduce was called before); a second reduction would count the other ranks' "
                        f"samples again. Reduce once per pass; reset() before accumulating a new pass"
                    )
            elif len(holders) > 1:
                found = "; ".join(f"{field}={json.loads(v)!r} on {_ranks(r)}" for v, r in holders.items())
                raise ValueError(
                    f"{self.kind}.all_reduce: the ranks disagree on {field} ({found}); every rank must build its "
                    f"accumulator with the same configuration before the statistics can be summed"
                )

    @_locked
    def reset(self: A) -> A:
        """Back to the empty state of a fresh, unreduced accumulator (on the device given at construction, if
        any)."""
        self._state = None
        self._reduced = False
        self._device = self._home
        if self._home is not None:
            self._allocate(self._home)
        for c in self.children:
            self._child(c).reset()
        self._changed()
        return self

    # ------------------------------------------------------------------ state dicts
    @_locked
    def state_dict(self) -> dict[str, Any]:
        """``kind``, ``format_version``, the configuration, ``state`` (CPU numpy copies, or None before the first
        batch), ``buffers`` (if any) and one nested state dict per child."""
        sd: dict[str, Any] = {"kind": self.kind, "format_version": FORMAT_VERSION, **self._config()}
        sd["state"] = None if self._state is None else {k: v.cpu().numpy().copy() for k, v in self._state.items()}
        buffers = self._buffers()
        if buffers:
            sd["buffers"] = {k: np.array(v, copy=True) for k, v in buffers.items()}
        for c in self.children:
            sd[c] = self._child(c).state_dict()
        return sd

    def _validate(self, sd: Mapping[str, Any]) -> None:
        kind = sd.get("kind")
        if kind != self.kind:
            raise ValueError(f"state is of kind {kind!r}, not {self.kind!r}")
        version = sd.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"unsupported {self.kind} format_version {version!r} (this nclab reads {FORMAT_VERSION})")
        for key, mine in self._config().items():
            if sd.get(key) != mine:
                raise ValueError(f"state has {key}={sd.get(key)!r}, these {self.kind} have {key}={mine!r}")
        buffers = sd.get("buffers") or {}
        for key, mine in self._buffers().items():
            if key not in buffers:
                raise ValueError(f"state is missing buffer {key!r}")
            if not np.array_equal(np.asarray(buffers[key]), mine):
                raise ValueError(f"state was built with a different {self.buffer_labels.get(key, key)}")
        arrays = sd.get("state")
        if arrays is not None:
            if not isinstance(arrays, Mapping):
                raise ValueError(f"state must be a mapping of arrays or None, got {type(arrays).__name__}")
            for name, spec in self._specs.items():
                if name not in arrays:
                    raise ValueError(f"state is missing {name!r}")
                arr = np.asarray(arrays[name])
                if tuple(arr.shape) != spec.shape:
                    raise ValueError(f"state {name!r} has shape {tuple(arr.shape)}, expected {spec.shape}")
                if arr.dtype != spec.numpy_dtype:
                    raise ValueError(f"state {name!r} has dtype {arr.dtype}, expected {spec.numpy_dtype}")
        for c in self.children:
            child = self._child(c)
            if not isinstance(sd.get(c), Mapping):
                raise ValueError(f"state is missing the {child.kind} state of {c}")
            child._validate(sd[c])

    def _validate_values(self, sd: Mapping[str, Any]) -> None:
        """The invariants of a state dict that passed :meth:`_validate`: finite floats, ``nonnegative`` states
        ``>= 0``, then :meth:`_check_consistency`; children first."""
        for c in self.children:
            self._child(c)._validate_values(sd[c])
        arrays = sd.get("state")
        if arrays is not None:
            for name, spec in self._specs.items():
                arr = np.asarray(arrays[name])
                if spec.dtype.is_floating_point and not np.isfinite(arr).all():
                    bad = int(arr.size - np.isfinite(arr).sum())
                    raise ValueError(f"state {name!r} has {bad} non-finite entr{'y' if bad == 1 else 'ies'}")
                if spec.nonnegative and arr.size and arr.min() < 0:
                    raise ValueError(f"state {name!r} has a negative entry ({arr.min()!r}); it cannot be negative")
        self._check_consistency(sd)

    def _assign(self, sd: Mapping[str, Any]) -> None:
        arrays = sd["state"]
        self._reduced = False
        if arrays is None:
            self._state = None
            self._device = self._home
            if self._home is not None:
                self._allocate(self._home)
        else:
            self._allocate(self._device or torch.device("cpu"))
            assert self._state is not None
            for name, t in self._state.items():
                t.copy_(torch.from_numpy(np.array(arrays[name], copy=True)))
        for c in self.children:
            self._child(c)._assign(sd[c])
        self._changed()

    @_locked
    def load_state_dict(self: A, sd: Mapping[str, Any]) -> A:
        """Restore :meth:`state_dict` output; everything (kind, version, configuration, buffers, each array's
        presence, shape and dtype, the children, the values' invariants) is validated before anything changes.
        Returns ``self``."""
        sd = _renamed_config(sd)
        self._validate(sd)
        self._validate_values(sd)
        self._assign(sd)
        return self

    # ------------------------------------------------------------------ files
    def save(
        self,
        path: str | Path,
        *,
        run_id: str | None = None,
        epoch: int | None = None,
        layer: str | None = None,
        split: str | None = None,
    ) -> Path:
        """Write to ``.npz`` (default) or ``.safetensors`` (needs ``safetensors``), atomically, sealed with the
        checksum ``sha256`` (see the module documentation); returns the path.

        Parameters
        ----------
        path : str or Path
            The file; its suffix chooses the format.
        run_id, epoch, layer, split : optional
            Where the statistics come from: the run's id (the ``run_id`` column of its ``metrics.csv``), the epoch,
            the measured layer and the split. Recorded in the file's metadata (``provenance``, under the checksum)
            and given back as :attr:`provenance` by :meth:`load`; ``nclab verify`` checks them against the
            file's name (``epoch_5`` / ``epoch5``, a split or layer named in it) and the run's metrics table.

        Examples
        --------
        >>> import tempfile, pathlib, numpy as np
        >>> from nclab import ClassStats
        >>> s = ClassStats.from_arrays(np.eye(3), [0, 1, 2])
        >>> path = s.save(pathlib.Path(tempfile.mkdtemp()) / "epoch_5.npz", epoch=5, layer="fc", split="train")
        >>> ClassStats.load(path).provenance
        {'epoch': 5, 'layer': 'fc', 'split': 'train'}
        """
        path = Path(path)
        provenance = _check_provenance(run_id=run_id, epoch=epoch, layer=layer, split=split)
        meta, arrays = _flatten(self.state_dict())
        if provenance:
            meta[_PROVENANCE] = json.dumps(provenance, sort_keys=True)
        meta[_CHECKSUM] = json.dumps(arrays_sha256(meta, arrays, skip=_CHECKSUM))
        if path.suffix == ".safetensors":
            from safetensors.numpy import save as st_save

            data = st_save({k: np.array(v, order="C") for k, v in arrays.items()}, metadata=meta)  # keeps 0-d
        else:
            buf = io.BytesIO()
            # allow_pickle spelled out (its default): the stubs would otherwise let the ** mappings fill it
            np.savez(buf, allow_pickle=True, **{_META + k: np.array(v) for k, v in meta.items()}, **arrays)
            data = buf.getvalue()
        return atomic_write_bytes(path, data)

    @classmethod
    def load(cls: type[A], path: str | Path, *, device: str | torch.device | None = None) -> A:
        """Read a file written by :meth:`save`, checking it (see the module documentation) before anything is
        built. On the base class, ``Accumulator.load`` returns the class the file's ``kind`` names.

        Raises
        ------
        CorruptFileError
            (a ``ValueError``) naming the file and the problem: unreadable (truncated, empty, another format),
            another kind or version, a missing or misshapen array, a checksum mismatch, an invalid value.
        FileNotFoundError
            When there is no file at ``path``.
        """
        path = Path(path)
        meta, arrays = _read(path)
        try:
            stored = meta.pop(_CHECKSUM, None)
            # files written before the provenance was recorded have none; it is covered by the checksum
            provenance = _read_provenance(meta.get(_PROVENANCE))
            sd = _renamed_config(_unflatten({k: v for k, v in meta.items() if k != _PROVENANCE}, arrays))
            kind = sd.get("kind")
            target: type[Accumulator] = cls
            if cls is Accumulator:
                named = _subclasses().get(kind) if isinstance(kind, str) else None
                if named is None:
                    raise ValueError(f"not an nclab accumulator file (kind {kind!r})")
                target = named
            elif kind != cls.__name__:
                raise ValueError(f"not an nclab {cls.__name__} file (kind {kind!r})")
            version = sd.get("format_version")
            if version != FORMAT_VERSION:
                raise ValueError(f"unsupported {kind} format_version {version!r} (this nclab reads {FORMAT_VERSION})")
            config = {k: v for k, v in sd.items() if k not in ("kind", "format_version", "state", "buffers")}
            out = target._from_config(config, sd.get("buffers") or {}, torch.device(device) if device else None)
            out._validate(sd)
            if stored is None:
                raise ValueError(f"no checksum (metadata {_CHECKSUM!r})")
            if json.loads(stored) != arrays_sha256(meta, arrays, skip=_CHECKSUM):
                raise ValueError("checksum mismatch: the contents changed after they were saved (bit flip, edit)")
            out._validate_values(sd)
            out._assign(sd)
            out.provenance = provenance
            assert isinstance(out, cls)  # cls itself, or the subclass the file names when cls is Accumulator
            return out
        except (ValueError, KeyError, TypeError) as err:
            raise CorruptFileError(
                path, str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
            ) from err


def _check_provenance(**fields: Any) -> dict[str, Any]:
    """The given provenance fields of :meth:`Accumulator.save` (``None`` left out), checked."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key == "epoch":
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise ValueError(f"epoch must be an int >= 0, got {value!r}")
            value = int(value)
        elif not isinstance(value, str) or not value or any(c in value for c in ',"\n\r'):
            raise ValueError(f"{key} must be a non-empty string without commas, quotes or line breaks, got {value!r}")
        out[key] = value
    return out


def _read_provenance(text: str | None) -> dict[str, Any]:
    """The provenance recorded in a file's metadata (``{}`` when there is none)."""
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"metadata {_PROVENANCE!r} is not valid JSON ({text!r})") from err
    if not isinstance(value, dict) or set(value) - {"run_id", "epoch", "layer", "split"}:
        raise ValueError(f"metadata {_PROVENANCE!r} is not a record of run_id, epoch, layer and split ({text!r})")
    return _check_provenance(**value)


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def _subclasses() -> dict[str, type[Accumulator]]:
    out: dict[str, type[Accumulator]] = {}
    todo = list(Accumulator.__subclasses__())
    while todo:
        sub = todo.pop()
        out[sub.__name__] = sub
        todo.extend(sub.__subclasses__())
    return out


# ---------------------------------------------------------------------- file layout
def _flatten(sd: Mapping[str, Any], prefix: str = "") -> tuple[dict[str, str], dict[str, np.ndarray]]:
    meta: dict[str, str] = {}
    arrays: dict[str, np.ndarray] = {}
    for key, value in sd.items():
        if key == "state":
            meta[prefix + "has_state"] = json.dumps(value is not None)
            arrays.update({f"{prefix}state__{k}": v for k, v in (value or {}).items()})
        elif key == "buffers":
            arrays.update({f"{prefix}buffer__{k}": np.asarray(v) for k, v in value.items()})
        elif isinstance(value, Mapping):
            m, a = _flatten(value, f"{prefix}{key}__")
            meta.update(m)
            arrays.update(a)
        else:
            meta[prefix + key] = json.dumps(value)
    return meta, arrays


def _renamed_config(sd: Mapping[str, Any]) -> dict[str, Any]:
    """``sd`` with the configuration keys of older states (:data:`_OLD_CONFIG_KEYS`) renamed, children included;
    a key is renamed only where its new name is absent, and the arrays are not copied."""
    out: dict[str, Any] = {}
    for key, value in sd.items():
        if key not in ("state", "buffers") and isinstance(value, Mapping):
            value = _renamed_config(value)  # a child's state dict
        new = _OLD_CONFIG_KEYS.get(key)
        out[new if new is not None and new not in sd else key] = value
    return out


def _unflatten(meta: Mapping[str, str], arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    sd: dict[str, Any] = {}
    nested_meta: dict[str, dict[str, str]] = {}
    nested_arrays: dict[str, dict[str, np.ndarray]] = {}
    for key, value in meta.items():
        head, sep, rest = key.partition("__")
        if sep:
            nested_meta.setdefault(head, {})[rest] = value
            continue
        try:
            sd[key] = json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(f"metadata {key!r} is not valid JSON ({value!r})") from err
    state: dict[str, np.ndarray] = {}
    buffers: dict[str, np.ndarray] = {}
    for key, arr in arrays.items():
        head, _, rest = key.partition("__")
        if head == "state":
            state[rest] = arr
        elif head == "buffer":
            buffers[rest] = arr
        else:
            nested_arrays.setdefault(head, {})[rest] = arr
    has_state = sd.pop("has_state", True)
    if has_state and not state:
        raise ValueError("metadata says the file holds a state, but it has no state arrays")
    sd["state"] = state if has_state else None
    if buffers:
        sd["buffers"] = buffers
    for child in {*nested_meta, *nested_arrays}:
        sd[child] = _unflatten(nested_meta.get(child, {}), nested_arrays.get(child, {}))
    return sd


def _read(path: Path) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    if not path.exists():
        raise FileNotFoundError(f"no accumulator file at {path}")
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="numpy") as fh:
                return dict(fh.metadata() or {}), {k: fh.get_tensor(k) for k in fh.keys()}
        with np.load(path, allow_pickle=False) as fh:
            meta = {k[len(_META) :]: str(fh[k]) for k in fh.files if k.startswith(_META)}
            return meta, {k: fh[k] for k in fh.files if not k.startswith(_META)}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, KeyError) as err:
        raise CorruptFileError(
            path, f"cannot read an accumulator file (truncated or not {path.suffix}): {err}"
        ) from err
    except Exception as err:  # safetensors raises its own SafetensorError for a malformed header
        if type(err).__name__ != "SafetensorError":
            raise
        raise CorruptFileError(
            path, f"cannot read an accumulator file (truncated or not {path.suffix}): {err}"
        ) from err
