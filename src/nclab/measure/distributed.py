"""Who this process is under ``torch.distributed``: :func:`is_distributed` and :func:`rank`.

The one definition read by the measurement engine, :class:`~nclab.monitor.CollapseMonitor` and the trainer. Both
are plain reads of the process group (and of ``RANK``); launching a run, joining the group and cutting shards
stay with the trainer (:mod:`nclab.train.distributed`).
"""

from __future__ import annotations

import os

import torch.distributed as dist

__all__ = ["is_distributed", "rank"]


def is_distributed() -> bool:
    """Whether a process group of more than one rank is active.

    Returns
    -------
    bool
        True when ``torch.distributed`` is available and initialised with a world size above 1; False in a
        single process, and in a group of one rank.

    See Also
    --------
    rank : this process's rank.

    Examples
    --------
    >>> is_distributed()  # a single process
    False
    """
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This process's rank: the group's when one of more than one rank is active, else ``RANK`` from the
    environment (a launcher sets it before the group is joined and it stays after the group is left), else 0.

    Returns
    -------
    int
        The rank, 0 for a single process without ``RANK``.

    See Also
    --------
    is_distributed : whether a group of more than one rank is active.

    Examples
    --------
    >>> rank()  # a single process
    0
    """
    return dist.get_rank() if is_distributed() else int(os.environ.get("RANK", "0"))
