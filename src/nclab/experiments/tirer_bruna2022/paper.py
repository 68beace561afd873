"""What [Tirer & Bruna 2022] states: its headline claims and its training protocols.

:data:`CLAIMS`: each claim with the paper's quoted sentence, its value and the criteria that judge ours.
:data:`PROTOCOLS`: per experiment and run label, ``{field path: Value}`` with each value's source.

Written apart from the code that builds the runs (:mod:`nclab.experiments.tirer_bruna2022.experiments`): nothing here
imports it, and ``tests/test_reproduction_protocols.py`` compares the two texts field by field.
"""

from __future__ import annotations

from nclab.experiments.claims import (
    Bound,
    Claim,
    Close,
    Converged,
    Monotone,
    Value,
    ours,
    quote,
)

_q = quote  # the quotes below cite the papers' text files by line

__all__ = ["CLAIMS", "PROTOCOLS"]

_TB = "[Tirer & Bruna 2022]"


#: [Tirer & Bruna 2022]'s headline claims we judge, and our checks, in paper order.
CLAIMS: tuple[Claim, ...] = (
    *(
        Claim(
            f"tirer2022-fig{i}-gd-optimum", _TB, f"Fig. {i}, Sec. 6 ({thm})",
            f"GD objective at the end vs the closed-form optimum L*, {model}",
            "GD reaches the closed-form global minimiser (NC1-NC3 -> 0 read off the figure, log scale)",
            (Close((fig, key), target_key=(fig, "L_star"), rtol=1e-8, partly_rtol=0.05),), "ufm-figures",
            "K = 4, d = 20, n = 50, lambda = 5e-3 (the paper's sizes are lost from its text); GD lr 0.1, 1e5 steps"
            + extra,
            quote=_q(_TB, 112, "For each setting that is considered in the theorems of Sections 3 "
                        "and 4 we tune a gradient descent scheme to reach a global minimizer."),
        )
        for i, fig, thm, model, key, extra in (
            (1, "fig1-thm3.1-bias-free", "Thm 3.1", "bias-free UFM", "loss", ""),
            (2, "fig2-thm3.2-free-bias", "Thm 3.2", "UFM with free bias", "loss", ""),
            (3, "fig3-thm4.1-extended-linear", "Thm 4.1", "3-factor linear UFM", "loss", ""),
            (
                4, "fig4-thm4.2-extended-relu", "Thm 4.2", "3-factor ReLU UFM", "optimum_loss",
                "; plain GD stops above L* when one sample's ReLU pre-activations all die (dead_samples: its h1 "
                "gets no gradient, only weight decay); moving that sample's h1 to its class mean and continuing GD "
                "reaches L* (revived_gap), our tuning of the scheme, which the paper tunes too; optimum_loss is "
                "that point's objective (GD's own when no sample died)",
            ),
        )
    ),
    Claim(
        "tirer2022-thm31-32-structure", _TB, "Thms 3.1, 3.2, Figs. 1-2, Sec. 3",
        "NC1 and the structure of the class means at the GD optimum: an orthogonal frame without bias (OF error, "
        "eq. (27)), a simplex ETF, and no OF, with a free bias",
        "bias-free: features collapse to an orthogonal frame; free bias: to a simplex ETF (theorem)",
        (
            Bound(("fig1-thm3.1-bias-free", "levels", "H", "nc1"), 1e-8, basis="ours: 1e-8; the theorem says 0"),
            Bound(("fig1-thm3.1-bias-free", "levels", "H", "orthogonal_frame_error"), 1e-6, basis="ours: 1e-6"),
            Bound(("fig2-thm3.2-free-bias", "levels", "H", "nc1"), 1e-8, basis="ours: 1e-8"),
            Bound(("fig2-thm3.2-free-bias", "levels", "H", "etf_gram_error"), 1e-6, basis="ours: 1e-6"),
            Bound(("fig2-thm3.2-free-bias", "levels", "H", "orthogonal_frame_error"), 0.1, below=False,
                  basis="an ETF, not an OF: an exact K = 4 ETF has OF error 0.52"),
        ),
        "ufm-figures", "the figures' runs (K = 4, d = 20, n = 50, lambda = 5e-3), at the end of GD",
        quote=_q(_TB, 51, "while in the unregularized-bias case the features and weights of any "
                    "global minimizer are aligned in a simplex ETF structure"),
    ),
    Claim(
        "tirer2022-thm42-relu-two-levels", _TB, "Thm 4.2, Fig. 5 (ReLU model), Sec. 6",
        "NC2 to an orthogonal frame (OF error, eq. (27)) of the two feature levels at the optimum: with the ReLU "
        "the deep level H2 collapses to an OF and the shallow H1 does not; without it (Thm 4.1) both do",
        "ReLU model: H2 collapses to an OF (Thm 4.2), H1 keeps its own structure; linear model: H1 and H2 both "
        "collapse to OFs (Thm 4.1)",
        (
            Bound(("fig4-thm4.2-extended-relu", "optimum_levels", "H2", "orthogonal_frame_error"), 1e-3, partly=0.1,
                  basis="ours: 1e-3, partly 0.1; the theorem says 0"),
            Bound(("fig4-thm4.2-extended-relu", "optimum_levels", "H1", "orthogonal_frame_error"), 0.1, below=False,
                  basis="ours: H1 at least 0.1 from an OF, where H2 is within 1e-3"),
            Bound(("fig3-thm4.1-extended-linear", "levels", "H1", "orthogonal_frame_error"), 1e-3, partly=0.1,
                  basis="the contrast: the linear model's H1 collapses to an OF as Thm 4.1 says; ours: 1e-3"),
        ),
        "ufm-figures",
        "the structure half only, at L* (the ReLU model's revived point); the rate half (how fast each level's NC1 "
        "falls) is in the figures' csv files, not judged; same sizes as the figure claims",
        quote=_q(_TB, 127, "adding the ReLU nonlinearity to the model better distinguishes between "
                    "the behavior of the features in the two levels, both in the rate of the collapse and in its "
                    "structure."),
    ),
    Claim(
        "tirer2022-thm3-thresholds", _TB, "Thms 3.1, 3.2, 4.1, Secs. 3-4",
        "closed-form optimum L* across the lambda threshold vs numerical L-BFGS",
        "zero optimum exactly above the threshold (theorem)",
        (Bound("max_abs_gap", 1e-8),), "ufm-threshold-sweep", "K = 4, n = 3, d = 8, 25 lambdas per model",
        quote=_q(_TB, 219, "Summarizing our finding, we have that if then the minimizer is (because the singular "
                 "values of the matrices are zero)"),
    ),
    Claim(
        "tirer2022-thm51-attenuation", _TB, "Thm 5.1, Sec. 5, App. F",
        "||W_hat - f W*|| / ||W*|| against n: it shrinks as n grows (the theorem's limit) and its log-log slope",
        "a limit, n -> infinity (App. F); slope -1/2 (derived: the CLT rate of the sample covariances the limits "
        "rest on; the paper prints no rate)",
        (
            Monotone("errors", -1, basis="the paper's limit: the error shrinks as n grows"),
            Close("slope", -0.5, atol=0.05, partly_rtol=0.5, basis="ours: the CLT rate, +-0.05 (partly +-50 %)"),
        ),
        "ufm-thm51", "K = 4, d = 20, sigma = 0.3, 10 draws per n",
        quote=_q(_TB, 350, "Based on the law of large numbers, as well as the convergence of "
                    "sample covariance matrices of random variables with finite fourth moment (Vershynin, 2012), "
                    "we have the following limits"),
        paper_value_ours=True,
    ),
    Claim(
        "tirer2022-fig5-10-resnet-depth", _TB, "Figs. 5 / 10, Sec. 6",
        "NC1 per ResNet stage (MSE, no bias) and the deepest features' structure, networks at zero training error",
        "NC1 decreases monotonically with depth; the deepest features approach an orthogonal frame (read off the "
        "figures: NC2 to OF -> ~0)",
        (
            Close("nc1_decreasing_in_depth", True),
            Bound("of_error_last_block", 0.1, partly=0.5, basis="ours: 0.1, partly 0.5; a simplex ETF has 0.32"),
            Converged("networks", basis="target: zero training error at the last epoch", dropped_ok=True),
        ),
        "resnet-depth",
        "cpu scale: only the 8x8 digits (1,300 training images), torchvision-layout ResNet18 and ResNet34 at width "
        "8, 45 epochs; the claims read the networks that reached zero training error (the summary's 'converged'; "
        "the others are named in 'dropped' with their training error), the OF check the deepest of them; the "
        "paper: ResNet18 (width 64) on MNIST and CIFAR-10",
        quote=_q(_TB, 93, "(1) structured collapse appears only in the deepest features; (2) "
                    "decrease in within-class variability is obtained monotonically along the depth of the network"),
    ),
    Claim(
        "tirer2022-fig5-ce-bias", _TB, "Fig. 5 (case 2), Sec. 6",
        "ResNet18 on MNIST trained with cross-entropy and a bias in the FC layer: its NC metrics per stage behave "
        "like those of the nonlinear extended UFM",
        "case 2 correlates with the extended UFM as case 1 does (read off the figure)", (), None,
        "not measured: resnet-depth runs case 1 only (MSE, no bias)",
        quote=_q(_TB, 128, "Figure 5 shows the results for two cases: 1) MSE loss without bias in "
                    "the FC layer; and 2) the widely-used setting, with cross-entropy loss and bias."),
        protocol="resnet-depth's ResNet18 on MNIST with CE loss and an FC bias, SGD lr 0.05 divided by 10 every 40 "
        "epochs, weight decay 5e-4, trained to zero training error; NC1 per stage and the deepest features' "
        "structure, as tirer2022-fig5-10-resnet-depth",
    ),
    Claim(
        "tirer2022-appG-other-configs", _TB, "Fig. 9, App. G",
        "GD reaches the minimisers of Thms 3.1-4.2 at other sizes and regularisation strengths than Sec. 6's",
        "NC metrics -> 0 as in Figs. 1-5 (read off the figure)", (), None,
        "not measured: App. G's sizes and lambdas are lost from the paper's text (as Sec. 6's, which ufm-figures "
        "replaces by K = 4, d = 20, n = 50, lambda = 5e-3)",
        quote=_q(_TB, 371, "In this section, we present more numerical results, for experiments "
                    "that are similar to those in Section 6 but with different configurations."),
        protocol="ufm-figures at App. G's configurations (the four models at the sizes and lambdas of Fig. 9, which "
        "the paper's text file lost), GD step 0.1 from the stated initialisations, the objective against L*",
    ),
)  # fmt: skip


# ------------------------------------------------------------------------- 001 [Tirer & Bruna 2022]
def _resnet_depth() -> dict[str, dict[str, Value]]:
    f5, f10 = "[Tirer & Bruna 2022, Fig. 5]", "[Tirer & Bruna 2022, Fig. 10]"
    out = {}
    for ds, loss, bias, src in (("mnist", "mse", False, f5), ("mnist", "ce", True, f5), ("cifar10", "mse", False, f10)):
        out[f"{ds}/resnet18/{loss}-{'bias' if bias else 'nobias'}"] = {
            "model": Value("resnet18", src),
            "head.bias": Value(bias, f"{src}: MSE without the classifier's bias, CE with it"),
            "data.name": Value(ds, src),
            "data.input_size": (
                ours(32, "how MNIST is fed to ResNet18 is not given; padded to 32 as [Han et al. 2022]")
                if ds == "mnist"
                else Value(32, src)
            ),
            "loss": Value(loss, src),
            "optimiser.name": Value("sgd", src),
            "optimiser.momentum": ours(0.9, "not given; the Papyan et al. 2020 / Zhu et al. 2021 baseline"),
            "lr": Value(0.05, src),
            "schedule.name": Value("multistep", f"{src}: lr / 10 every 40 epochs"),
            "schedule.milestones": Value([40, 80], f"{src}: every 40 epochs (over ours 120)"),
            "epochs": ours(120, "the number of epochs is not given; three 40-epoch phases of its schedule"),
            "batch": ours(128, "not given; the batch of the Papyan et al. 2020 baseline"),
            "weight_decay": Value(5e-4, src),
            "measure.layers": Value("all", f"{src}: every ResBlock and the penultimate layer"),
            "seeds": ours([0], "one run per figure"),
        }
    return out


#: Per experiment, per run label: ``{field path: Value}`` of the paper's protocol.
PROTOCOLS: dict[str, dict[str, dict[str, Value]]] = {"resnet-depth": _resnet_depth()}
