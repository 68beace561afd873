"""[Han et al. 2022]: neural collapse under MSE loss, the central path.

:mod:`~nclab.experiments.han2022.experiments` is what we run (``fashion-mnist-cnn``, ``mse-nc-benchmarks``,
``central-path-flow``, ``mse-decomposition-ufm``), :mod:`~nclab.experiments.han2022.summaries` the keys its claims
read off a trained run, and :mod:`~nclab.experiments.han2022.paper` what the paper states (its claims and protocols).
"""

__all__: list[str] = []  # the application layer: its modules are what the registry imports
