"""What every training run of a reproduction records: whether it reached its target, and its final loss.

The claims (:mod:`nclab.experiments.claims`) read these keys to use only the runs that converged; the
experiments write them (:func:`convergence_keys`). Kept apart so that an experiment module writes them without
importing the claims.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONVERGED", "CONVERGENCE", "FINAL_LOSS", "convergence_keys"]

#: The per-run summary keys of :func:`convergence_keys`: ``"{run}: converged"`` and so on.
CONVERGED, FINAL_LOSS, CONVERGENCE = "converged", "final loss", "convergence"


def convergence_keys(
    run: str, *, reached: bool, final_loss: float | None, target: str, detail: str = ""
) -> dict[str, Any]:
    """The summary keys by which a training run records whether it reached its target.

    Parameters
    ----------
    run : str
        The run's label in the summary (e.g. ``"mse seed1"``); the keys are ``"{run}: converged"`` (bool),
        ``"{run}: final loss"`` (float or ``None``) and ``"{run}: convergence"`` (text: the target and what the
        run reached).
    reached : bool
        Whether the run reached ``target``.
    final_loss : float or None
        The training loss at the last measured epoch.
    target : str
        The target in words: ``"zero training error"``, or the paper's stated accuracy.
    detail : str, default=""
        What the run reached, e.g. ``"zero training error at epoch 27"`` or ``"27.5 % training error at the end"``.

    Returns
    -------
    dict
        The three keys.

    Examples
    --------
    >>> convergence_keys("mse seed0", reached=False, final_loss=0.3, target="zero training error",
    ...                  detail="2.5 % training error at the end")["mse seed0: convergence"]
    'target zero training error: not reached (2.5 % training error at the end)'
    """
    said = "reached" if reached else "not reached"
    return {
        f"{run}: {CONVERGED}": bool(reached),
        f"{run}: {FINAL_LOSS}": None if final_loss is None else float(final_loss),
        f"{run}: {CONVERGENCE}": f"target {target}: {said}" + (f" ({detail})" if detail else ""),
    }
