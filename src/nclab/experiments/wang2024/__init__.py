"""[Wang et al. 2024]: progressive feedforward collapse.

:mod:`~nclab.experiments.wang2024.experiments` is what we run (``geodesic-digits``, ``pfc-table1``, ``mufm-tradeoff``),
:mod:`~nclab.experiments.wang2024.paper` what the paper states (its claims and protocol).
"""

__all__: list[str] = []  # the application layer: its modules are what the registry imports
