"""Sizes checked before allocation: estimate the bytes an entry point needs, refuse before allocating them.

Every entry point whose memory grows as O(K^2), O(d^2), O(K d), O(n d) or O(K n d) (``ClassStats`` with
``track="full"``, the UFM solvers, the code searches, the central-path simulation) calls
:func:`check_allocation` with its estimate first. The estimate is compared with

* the memory available now (``psutil.virtual_memory().available`` when psutil is installed, else
  ``MemAvailable`` of ``/proc/meminfo``, else physical pages x page size; at most what an address-space limit
  ``ulimit -v`` leaves the process), and
* an optional cap: the ``max_bytes`` keyword, else the environment variable ``NCLAB_MAX_BYTES`` (bytes, or a
  number with a suffix K, M, G, T: powers of 1024, e.g. ``NCLAB_MAX_BYTES=8G``),

and a request above the smaller of the two raises :class:`AllocationTooLarge` naming the size, what allocates it
and the alternative (``track="light"``, a tiled metric, a smaller problem) instead of an allocator traceback, or
the machine swapping for minutes.

Working blocks that an algorithm can size freely (the rows of NCC scores scored at once, say) are not refused but
bounded: :func:`work_budget` gives the bytes such a block may take next to the state that stays allocated, at
most :data:`WORK_BLOCK_BYTES`, the cap and the available memory allowing.
"""

from __future__ import annotations

import os
import re

__all__ = [
    "MAX_BYTES_ENV",
    "WORK_BLOCK_BYTES",
    "AllocationTooLarge",
    "available_bytes",
    "check_allocation",
    "configured_cap",
    "format_bytes",
    "work_budget",
]

#: Environment variable with a cap on any one allocation nclab checks (bytes, or e.g. ``512M``, ``8G``).
MAX_BYTES_ENV = "NCLAB_MAX_BYTES"

# Below this size a request is not checked unless a cap is set: reading the available memory costs a file
# read, and the small state of a typical ClassStats is created often (copies, merges, loads).
_UNCHECKED_BYTES = 64 << 20

#: Default bytes of a working block that an algorithm sizes to fit (:func:`work_budget`): large enough for its
#: matrix products to run at full speed (hundreds of rows even at K = 20,000 classes), small next to a machine's
#: memory.
WORK_BLOCK_BYTES = 32 << 20

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class AllocationTooLarge(MemoryError, ValueError):
    """An entry point refused to allocate more memory than is available (or than the configured cap).

    A ``MemoryError`` (it is one, raised before the allocation) and a ``ValueError`` (the size comes from the
    caller's arguments, so the command line reports it as a user error). Attributes: ``nbytes`` (requested),
    ``limit`` (the bound it exceeds), ``what`` (what would be allocated), ``alternative`` (what to do instead).
    """

    def __init__(self, nbytes: int, limit: int, what: str, alternative: str, source: str) -> None:
        self.nbytes, self.limit, self.what, self.alternative = int(nbytes), int(limit), what, alternative
        super().__init__(
            f"{what} would allocate about {format_bytes(nbytes)}, more than {source} ({format_bytes(limit)}); "
            f"{alternative}"
        )


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units.

    Parameters
    ----------
    n : float
        A number of bytes.

    Returns
    -------
    str
        Whole bytes below 1024 (``'512 B'``), else three significant digits of the largest unit that keeps the
        number below 1024 (KiB, MiB, GiB, TiB; PiB for anything larger).

    Examples
    --------
    >>> format_bytes(512), format_bytes(3 << 30), format_bytes(1536)
    ('512 B', '3 GiB', '1.5 KiB')
    """
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _parse_bytes(text: str, source: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:i?B)?\s*", text, flags=re.IGNORECASE)
    if m is None:
        raise ValueError(f"{source} must be a number of bytes, optionally with a suffix K, M, G or T, got {text!r}")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value <= 0:
        raise ValueError(f"{source} must be positive, got {text!r}")
    return value


def _system_available() -> int | None:
    try:
        import psutil
    except ImportError:
        pass
    else:
        return int(psutil.virtual_memory().available)
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def _address_space_left() -> int | None:
    """What an address-space limit (``ulimit -v``, RLIMIT_AS) leaves this process, if one is set."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm", encoding="ascii") as f:
            used = int(f.read().split()[0]) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    return max(int(limit) - used, 0)


def available_bytes() -> int | None:
    """Memory available to a new allocation now, in bytes.

    The system's available memory (psutil, else ``MemAvailable`` of ``/proc/meminfo``, else physical memory), and
    no more than an address-space limit (``ulimit -v``) leaves this process.

    Returns
    -------
    int or None
        Bytes; None where neither the memory nor a limit can be determined.

    Examples
    --------
    >>> avail = available_bytes()
    >>> avail is None or avail >= 0
    True
    """
    known = [v for v in (_system_available(), _address_space_left()) if v is not None]
    return min(known) if known else None


def configured_cap(cap: int | str | None = None) -> int | None:
    """The configured cap on one allocation.

    Parameters
    ----------
    cap : int or str or None, default None
        Bytes, or a number with a suffix K, M, G, T (powers of 1024, e.g. ``"8G"``); None reads
        ``NCLAB_MAX_BYTES`` from the environment.

    Returns
    -------
    int or None
        ``cap`` if given, else ``NCLAB_MAX_BYTES``, in bytes; None when neither is set.

    Raises
    ------
    TypeError
        ``cap`` is a bool.
    ValueError
        Not a size, or not positive (naming ``max_bytes`` or ``NCLAB_MAX_BYTES``).

    Examples
    --------
    >>> configured_cap("768K"), configured_cap(1000), configured_cap("2G")
    (786432, 1000, 2147483648)
    """
    if cap is not None:
        if isinstance(cap, bool):
            raise TypeError(f"max_bytes must be an int or a size such as '8G', got {cap!r}")
        return _parse_bytes(str(cap), "max_bytes")
    env = os.environ.get(MAX_BYTES_ENV)
    return None if env is None or not env.strip() else _parse_bytes(env, MAX_BYTES_ENV)


def check_allocation(nbytes: float, *, what: str, alternative: str, max_bytes: int | str | None = None) -> None:
    """Raise :class:`AllocationTooLarge` when ``nbytes`` exceeds the available memory or the cap.

    Parameters
    ----------
    nbytes : float
        Estimated bytes of the allocation (a float: products of large sizes are formed without overflow).
    what : str
        What allocates it, with the sizes (``"ClassStats(track='full') with d=100000 (d x d scatter)"``).
    alternative : str
        What the caller can do instead (``"use track='light' ..."``).
    max_bytes : int or str, optional
        A cap for this call; default ``NCLAB_MAX_BYTES`` (:func:`configured_cap`).

    Raises
    ------
    AllocationTooLarge
        Naming the size, ``what``, the bound exceeded and ``alternative``.

    Examples
    --------
    >>> check_allocation(1 << 20, what="a 1 MiB block", alternative="use less", max_bytes="2M")  # fits
    >>> check_allocation(3 << 20, what="a 3 MiB block", alternative="use less", max_bytes="2M")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    nclab.memory.AllocationTooLarge: a 3 MiB block would allocate about 3 MiB, more than the cap ... (2 MiB); use less
    """
    cap = configured_cap(max_bytes)
    if cap is None and nbytes <= _UNCHECKED_BYTES:
        return
    if cap is not None and nbytes > cap:
        raise AllocationTooLarge(int(nbytes), cap, what, alternative, f"the cap {MAX_BYTES_ENV}/max_bytes")
    avail = available_bytes()
    if avail is not None and nbytes > avail:
        raise AllocationTooLarge(int(nbytes), avail, what, alternative, "the memory available now")


def work_budget(fixed: float = 0.0, *, default: int | None = None, max_bytes: int | str | None = None) -> int:
    """Bytes that a working block may take next to ``fixed`` bytes of state that stay allocated.

    ``default`` (:data:`WORK_BLOCK_BYTES` unless given), but no more than the cap (:func:`configured_cap`) leaves
    beside ``fixed``, nor, when the total is large enough to be checked (as :func:`check_allocation` checks), the
    memory available now leaves beside it. A caller sizes its blocks to this instead of refusing; what cannot fit at
    all (``fixed`` plus one row) it refuses with :func:`check_allocation`.

    Parameters
    ----------
    fixed : float, default 0.0
        Bytes of state that stay allocated while the blocks are worked on.
    default : int or None, default None
        The block size wanted; None means :data:`WORK_BLOCK_BYTES`.
    max_bytes : int or str or None, default None
        A cap for this call; default ``NCLAB_MAX_BYTES`` (:func:`configured_cap`).

    Returns
    -------
    int
        Bytes for one block, at least 1 (also when ``fixed`` alone exceeds the cap).

    Examples
    --------
    >>> work_budget(0, default=1 << 20, max_bytes="768K")  # the cap leaves 768 KiB
    786432
    >>> work_budget(512 << 10, default=1 << 20, max_bytes="768K")  # 512 KiB of state leave 256 KiB
    262144
    """
    budget = float(WORK_BLOCK_BYTES if default is None else default)
    cap = configured_cap(max_bytes)
    if cap is not None:
        budget = min(budget, cap - fixed)
    if fixed + budget > _UNCHECKED_BYTES:
        avail = available_bytes()
        if avail is not None:
            budget = min(budget, avail - fixed)
    return max(int(budget), 1)
