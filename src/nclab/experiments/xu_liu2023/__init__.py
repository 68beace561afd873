"""[Xu & Liu 2023]: the variability collapse index and transfer.

:mod:`~nclab.experiments.xu_liu2023.experiments` is what we run (experiment ``vci-transfer``),
:mod:`~nclab.experiments.xu_liu2023.paper` what the paper states (its claims, protocol and tables).
"""

__all__: list[str] = []  # the application layer: its modules are what the registry imports
