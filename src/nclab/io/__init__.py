"""Files nclab writes and reads: atomic writes (one helper for every writer), feature / label / classifier arrays
from .npy (memory-mapped), .npz, .pt and .safetensors files, and the run-directory table."""

from nclab.io.arrays import iter_batches, load_array, split_key
from nclab.io.atomic import atomic_torch_save, atomic_write_bytes, atomic_write_text

__all__ = ["atomic_torch_save", "atomic_write_bytes", "atomic_write_text", "iter_batches", "load_array", "split_key"]
