"""[Tirer & Bruna 2022]: the extended unconstrained-features model.

:mod:`~nclab.experiments.tirer_bruna2022.experiments` is what we run (``ufm-figures``, ``ufm-threshold-sweep``,
``ufm-init-scale``, ``ufm-thm51``, ``resnet-depth``), :mod:`~nclab.experiments.tirer_bruna2022.paper` what the
paper states (its claims and protocol).
"""

__all__: list[str] = []  # the application layer: its modules are what the registry imports
