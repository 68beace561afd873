"""Unconstrained-features laboratory: UFM objectives, solvers and closed-form optima
([Tirer & Bruna 2022; Wang et al. 2024]).

* :func:`solve` -- numerical optimum of a model (L-BFGS reference, the papers' GD, central path, exact
  alternating), returning :class:`UFMResult`.
* :mod:`nclab.ufm.closed_forms` -- closed forms: ``closed_forms.optimum(model, K=, n=, d=, lams=)``.
* :mod:`nclab.ufm.models` -- the objectives with analytic gradients; :mod:`nclab.ufm.mufm` -- the [Wang et al. 2024]
  MUFM;
  :mod:`nclab.ufm.conventions` -- lambda normalisations; :mod:`nclab.ufm.analysis` -- collapse reports.
* :mod:`nclab.ufm.spherical` -- K > d models on the sphere [Jiang et al. 2024]: CE-UFM with temperature continuation,
  HardMax, weight-decay CE UFM (the Softmax and Tammes codes are in :mod:`nclab.geometry.codes`).
"""

from nclab.ufm import closed_forms, conventions, models, mufm, spherical
from nclab.ufm.analysis import collapse_reports, feature_levels
from nclab.ufm.conventions import from_canonical, to_canonical
from nclab.ufm.models import UFM_MODELS, ModelSpec, as_spec, evaluate, make_spec
from nclab.ufm.solvers import SOLVERS, UFMResult, solve
from nclab.ufm.spherical import (
    CESphereResult,
    WDResult,
    ce_ufm_sphere,
    hardmax_ufm,
    log_mean_ce,
    smoothed_hardmax,
    wd_ufm,
)

__all__ = [
    "SOLVERS",
    "UFM_MODELS",
    "CESphereResult",
    "ModelSpec",
    "UFMResult",
    "WDResult",
    "as_spec",
    "ce_ufm_sphere",
    "closed_forms",
    "collapse_reports",
    "conventions",
    "evaluate",
    "feature_levels",
    "from_canonical",
    "hardmax_ufm",
    "log_mean_ce",
    "make_spec",
    "models",
    "mufm",
    "smoothed_hardmax",
    "solve",
    "spherical",
    "to_canonical",
    "wd_ufm",
]
