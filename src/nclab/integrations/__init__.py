"""Framework callbacks around :class:`nclab.CollapseMonitor`: :mod:`nclab.integrations.lightning`
(``pip install nclab[lightning]``) and :mod:`nclab.integrations.hf` (``pip install nclab[hf]``); token-level
collapse of a Hugging Face causal LM over a text corpus: :mod:`nclab.integrations.lm` (``pip install nclab[hf]``).
Importing this package needs no framework; each module imports its own and, when it is missing, raises
``ImportError`` naming the extra to install."""
