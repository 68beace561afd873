"""The order of the gallery: from measuring a network to the theory, then transfer (sphinx-gallery's
``within_subsection_order``; a script not listed goes last, by name)."""

from __future__ import annotations

ORDER = (
    "plot_training_collapse.py",
    "plot_per_layer_collapse.py",
    "plot_token_collapse.py",
    "plot_ufm_optima.py",
    "plot_softmax_code.py",
    "plot_central_path.py",
    "plot_transfer_probe.py",
)


def order(filename: str) -> tuple[int, str]:
    return (ORDER.index(filename) if filename in ORDER else len(ORDER), filename)
