"""Files nclab writes and reads: atomic writes (one helper for every writer) and the run-directory table."""

from nclab.io.atomic import atomic_torch_save, atomic_write_bytes, atomic_write_text

__all__ = ["atomic_torch_save", "atomic_write_bytes", "atomic_write_text"]
