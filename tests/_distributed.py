"""Helpers for the torch.distributed tests: a free localhost port and a gloo process group per spawned rank."""

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import torch.distributed as dist


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gloo_group(rank: int, world: int, port: int) -> Iterator[None]:
    """Join a gloo group on localhost for the block (in a process started by ``torch.multiprocessing.spawn``)."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        yield
    except BaseException:
        dist.destroy_process_group()
        raise
    # Every rank past its last collective before any tears its connections down: a rank that exits while its peer
    # is still in gloo's shutdown was seen to abort the peer ("terminate called without an active exception",
    # twice in ~10 full suites; a known kind of gloo shutdown race). A failed rank skips this (no one would come).
    dist.barrier()
    dist.destroy_process_group()
