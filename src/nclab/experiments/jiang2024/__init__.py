"""[Jiang et al. 2024]: generalized neural collapse with K > d.

:mod:`~nclab.experiments.jiang2024.experiments` is what we run (the ``gnc-*`` experiments),
:mod:`~nclab.experiments.jiang2024.summaries` the summaries of its trained runs, and
:mod:`~nclab.experiments.jiang2024.paper` what the paper states (its claims and protocol).
"""

__all__: list[str] = []  # the application layer: its modules are what the registry imports
