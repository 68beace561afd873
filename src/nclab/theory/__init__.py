"""Theory engines: the MSE loss decomposition and central path (paper 004), the geodesic model of progressive
feedforward collapse (paper 002). Sub-modules: :mod:`~nclab.theory.mse`, :mod:`~nclab.theory.snr`,
:mod:`~nclab.theory.central_path`, :mod:`~nclab.theory.paired_stats`, :mod:`~nclab.theory.geodesic`,
:mod:`~nclab.theory.joint_gd`. See docs/theory.md."""

from nclab.theory import central_path, geodesic
from nclab.theory.central_path import CentralPathRun, closed_form_omega, simulate
from nclab.theory.geodesic import (
    GeodesicNCC,
    GeodesicPrediction,
    GeodesicProfile,
    geodesic_profile,
    predict,
    procrustes_etf,
    relative_depth,
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
from nclab.theory.paired_stats import PairedClassStats, PathStats
from nclab.theory.snr import SNR, central_path_terms, nc1_from_omega, renormalize, snr_matrix

__all__ = [
    "DECOMPOSITION_KEYS",
    "LAMBDA_CONVENTIONS",
    "SNR",
    "CentralPathRun",
    "GeodesicNCC",
    "GeodesicPrediction",
    "GeodesicProfile",
    "PairedClassStats",
    "PathStats",
    "central_path",
    "central_path_terms",
    "closed_form_omega",
    "decomposition_table",
    "geodesic",
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
    "relative_depth",
    "renormalize",
    "s01",
    "simulate",
    "snr_matrix",
]
