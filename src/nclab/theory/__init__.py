"""Theory engines: the MSE loss decomposition and central path [Han et al. 2022], the geodesic model of progressive
feedforward collapse [Wang et al. 2024]. Sub-modules: :mod:`~nclab.theory.mse`, :mod:`~nclab.theory.snr`,
:mod:`~nclab.theory.central_path`, :mod:`~nclab.theory.geodesic` (its streaming passes are accumulators in
:mod:`nclab.stats`), :mod:`~nclab.theory.joint_gd`. See docs/theory.md."""

from nclab.theory import central_path, geodesic
from nclab.theory.central_path import CentralPathRun, FlowOptions, closed_form_omega, simulate
from nclab.theory.geodesic import (
    GeodesicPrediction,
    GeodesicProfile,
    geodesic_ncc,
    geodesic_profile,
    predict,
    procrustes_etf,
    s01,
)
from nclab.theory.mse import (
    DECOMPOSITION_KEYS,
    LAMBDA_CONVENTIONS,
    decomposition_table,
    ls_classifier,
    ls_classifier_from_stats,
    mse_decomposition,
    mse_decomposition_from_stats,
    mse_loss_from_stats,
    paper_lambda,
)
from nclab.theory.snr import SNR, central_path_terms, nc1_from_omega, renormalize, snr_matrix

__all__ = [
    "DECOMPOSITION_KEYS",
    "LAMBDA_CONVENTIONS",
    "SNR",
    "CentralPathRun",
    "FlowOptions",
    "GeodesicPrediction",
    "GeodesicProfile",
    "central_path",
    "central_path_terms",
    "closed_form_omega",
    "decomposition_table",
    "geodesic",
    "geodesic_ncc",
    "geodesic_profile",
    "ls_classifier",
    "ls_classifier_from_stats",
    "mse_decomposition",
    "mse_decomposition_from_stats",
    "mse_loss_from_stats",
    "nc1_from_omega",
    "paper_lambda",
    "predict",
    "procrustes_etf",
    "renormalize",
    "s01",
    "simulate",
    "snr_matrix",
]
