"""UFM objectives with analytic gradients: one parametrised chain model covers the whole zoo.

Layout (project convention): features are rows, ``H (N, d)`` with ``N = K n`` samples ordered class-major
(labels ``y = repeat(arange(K), n)``, targets ``Y = onehot(y) (N, K)``, the transpose of the [Tirer & Bruna 2022]
``Y = I_K ⊗ 1_n^T``); weights are in ``nn.Linear`` layout, a layer ``W_l (d_l, d_{l-1})`` maps features by
``F_l = sigma(F_{l-1} W_l^T)``; the classifier is ``W (K, d)``, the bias ``b (K,)``. The papers write columns
(``H in R^{d x Kn}``, ``W H``); their matrices are our transposes, and nothing else changes.

The chain (``depth`` = number of weight matrices, classifier included) in the [Tirer & Bruna 2022] convention:

    F_0 = H1 (or H),   F_l = sigma(F_{l-1} W_l^T)  (l < depth),   Z = F_{depth-1} W_depth^T + 1 b^T
    L = loss(Z, Y) + sum_l lam_{W_l}/2 ||W_l||^2 + lam_H/2 ||H1 - X||^2 + lam_b/2 ||b||^2

* ``loss = "mse"``: ``1/(2Kn) ||Z - Y||_F^2`` [Tirer & Bruna 2022, eq. (3)]; ``"ce"``: ``1/(Kn) sum_i CE(z_i, y_i)``.
* ``X = 0`` except for the MUFM ([Wang et al. 2024, eq. (13)], the transport term ``lam/(2Kn) ||H - X||^2``).
* ``sigma`` = identity (``extended-linear``, eq. (23)) or ReLU (``extended-relu``, eq. (24)).

Gradients (``G_Z = (Z - Y)/N`` for MSE, ``(softmax(Z) - Y)/N`` for CE; [Tirer & Bruna 2022, eqs. (3)-(4)]-2.3,
transposed):
``grad W_depth = G_Z^T F + lam W``, ``grad b = G_Z^T 1 + lam_b b``, ``G_F = G_Z W``;
``G_{Z_l} = G_{F_l} * sigma'(Z_l)``, ``grad W_l = G_{Z_l}^T F_{l-1} + lam W_l``, ``G_{F_{l-1}} = G_{Z_l} W_l``;
``grad H1 = G_{F_0} + lam_H (H1 - X)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from nclab.ufm.conventions import check_lams, to_canonical
from nclab.validation import check_int

__all__ = [
    "UFM_MODELS",
    "Evaluation",
    "ModelSpec",
    "class_labels",
    "default_init_scale",
    "evaluate",
    "init_params",
    "make_spec",
    "one_hot_targets",
]

#: Model names of :func:`nclab.ufm.solve` and :func:`nclab.ufm.closed_forms.optimum`.
UFM_MODELS: tuple[str, ...] = (
    "mse-bias-free",
    "mse-bias",
    "mse-regbias",
    "extended-linear",
    "extended-relu",
    "ce-wd",
    "mufm",
    "ridge",
)

Loss = Literal["mse", "ce"]
BiasMode = Literal["none", "free", "ridge"]


def class_labels(K: int, n: int) -> np.ndarray:
    """Class-major labels ``repeat(arange(K), n)``, shape ``(K n,)``."""
    return np.repeat(np.arange(K), n)


def one_hot_targets(K: int, n: int) -> np.ndarray:
    """``Y (K n, K)``: row ``i`` is ``e_{y_i}`` (the transpose of the [Tirer & Bruna 2022] ``I_K ⊗ 1_n^T``)."""
    return np.repeat(np.eye(K), n, axis=0)


@dataclass(frozen=True)
class ModelSpec:
    """A fully specified UFM instance (weights in the [Tirer & Bruna 2022] canonical convention).

    Parameters
    ----------
    name : str
        Model name, one of :data:`UFM_MODELS`.
    K, n, d : int
        Classes, samples per class and feature dimension.
    depth : int
        Number of weight matrices, classifier included (1 for the two-factor models).
    activation : {"linear", "relu"}
        Activation between layers.
    loss : {"mse", "ce"}
        Data term.
    bias : {"none", "free", "ridge"}
        Bias of the classifier: none, unregularised or ridge-regularised.
    lams : dict of str to float
        Ridge weights in the canonical convention.
    X : ndarray of shape (K n, d), optional
        Data of the MUFM transport term (None: ``X = 0``).
    fixed : dict of str to ndarray
        Parameters held fixed (the ``ridge`` model's features).

    Examples
    --------
    >>> from nclab.ufm import make_spec
    >>> spec = make_spec("extended-relu", K=3, n=2, d=4, lams={"W1": 0.01, "W2": 0.01, "H1": 0.01})
    >>> spec.depth, spec.activation, spec.param_keys
    (2, 'relu', ('H1', 'W1', 'W2'))
    """

    name: str
    K: int
    n: int
    d: int
    depth: int
    activation: Literal["linear", "relu"]
    loss: Loss
    bias: BiasMode
    lams: dict[str, float]
    X: np.ndarray | None = field(default=None, repr=False)
    fixed: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def N(self) -> int:
        return self.K * self.n

    @property
    def feature_key(self) -> str:
        return "H" if self.depth == 1 else "H1"

    @property
    def weight_keys(self) -> tuple[str, ...]:
        """Layer weights in forward order; the last is the classifier."""
        return ("W",) if self.depth == 1 else tuple(f"W{i}" for i in range(1, self.depth + 1))

    @property
    def classifier_key(self) -> str:
        return self.weight_keys[-1]

    @property
    def param_keys(self) -> tuple[str, ...]:
        keys = (self.feature_key, *self.weight_keys)
        return (*keys, "b") if self.bias != "none" else keys

    @property
    def free_keys(self) -> tuple[str, ...]:
        """The optimised parameters (``param_keys`` minus the fixed ones)."""
        return tuple(k for k in self.param_keys if k not in self.fixed)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {self.feature_key: (self.N, self.d)}
        for i, key in enumerate(self.weight_keys):
            out[key] = (self.K, self.d) if i == self.depth - 1 else (self.d, self.d)
        if self.bias != "none":
            out["b"] = (self.K,)
        return out

    def lam(self, key: str) -> float:
        """Ridge weight of parameter ``key`` (features: ``H``/``H1``, or ``transport`` for the MUFM)."""
        if key == self.feature_key:
            return self.lams.get("transport", self.lams.get(key, 0.0))
        if key == "b":
            return self.lams.get("b", 0.0) if self.bias == "ridge" else 0.0
        return self.lams[key]

    @property
    def targets(self) -> np.ndarray:
        return one_hot_targets(self.K, self.n)

    @property
    def labels(self) -> np.ndarray:
        return class_labels(self.K, self.n)


_REQUIRED: dict[str, tuple[str, ...]] = {
    "mse-bias-free": ("W", "H"),
    "mse-bias": ("W", "H"),
    "mse-regbias": ("W", "H", "b"),
    "ce-wd": ("W", "H"),
    "mufm": ("W", "transport"),
    "ridge": ("W",),
}


def lambda_keys(model: str, depth: int | None = None) -> tuple[str, ...]:
    """The ridge weights ``lams`` that ``model`` needs: ``W, H`` (and ``b`` for mse-regbias, ``transport`` for
    mufm); ``H1, W1 .. W{depth}`` for the extended models (depth 2 by default)."""
    if model.startswith("extended"):
        return ("H1", *(f"W{i}" for i in range(1, (2 if depth is None else depth) + 1)))
    if model not in _REQUIRED:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(UFM_MODELS)}")
    return _REQUIRED[model]


def make_spec(
    model: str,
    *,
    K: int,
    n: int,
    d: int,
    lams: Mapping[str, float],
    convention: str = "penalty_sum",
    loss: Loss | None = None,
    depth: int | None = None,
    bias: BiasMode | None = None,
    X: Any = None,
    H: Any = None,
) -> ModelSpec:
    """Validate a model name, sizes and weights and build its :class:`ModelSpec`.

    ``lams`` keys: ``"W", "H", "b"`` (two-factor models), ``"W1" .. "W{depth}", "H1"`` (extended; ``W{depth}``
    is the classifier, default depth 2 = [Tirer & Bruna 2022, eq. (23)]/(24)), ``"W", "transport"`` (``mufm``,
    [Wang et al. 2024, eq. (13)] with data ``X (Kn, d)``), ``"W"`` (``ridge``: features ``H (Kn, d)`` held fixed,
    [Tirer & Bruna 2022, eq. (25)]). ``convention`` names the normalisation they are written in
    (:mod:`nclab.ufm.conventions`).
    ``loss="ce"`` gives the cross-entropy version of any model (``ce-wd`` is the bias-free CE UFM with weight
    decay; ``bias="free"|"ridge"`` adds a bias to it).

    Parameters
    ----------
    model : str
        One of :data:`UFM_MODELS`.
    K, n, d : int
        Classes, samples per class and feature dimension.
    lams : mapping of str to float
        Ridge weights, finite and ``>= 0``, keyed as above.
    convention : {"penalty_sum", "penalty_mean"}, default="penalty_sum"
        The normalisation ``lams`` are written in; stored converted to ``"penalty_sum"``.
    loss : {"mse", "ce"}, optional
        Data term (default: the model's own).
    depth : int, optional
        Number of weight matrices of the extended models (default 2).
    bias : {"none", "free", "ridge"}, optional
        Classifier bias (default: the model's own).
    X : array-like of shape (K n, d), optional
        The MUFM's data.
    H : array-like of shape (K n, d), optional
        The ``ridge`` model's fixed features.

    Returns
    -------
    ModelSpec
        The validated instance, weights in the canonical convention.

    Raises
    ------
    ValueError
        If the model is unknown, a size is not positive, or a weight is missing, unknown, negative or not finite.

    Examples
    --------
    >>> from nclab.ufm import make_spec
    >>> spec = make_spec("mse-bias-free", K=3, n=2, d=4, lams={"W": 0.03, "H": 0.06}, convention="penalty_mean")
    >>> spec.lams  # lam_W = lam'_W / K, lam_H = lam'_H / (K n)
    {'W': 0.01, 'H': 0.01}
    """
    if model not in UFM_MODELS:
        raise ValueError(f"unknown UFM model {model!r}; known: {', '.join(UFM_MODELS)}")
    K = check_int(K, name="K", low=2)
    n = check_int(n, name="n", low=1)
    d = check_int(d, name="d", low=1)
    lams_c = to_canonical(check_lams(lams), convention, K=K, n=n)
    extended = model.startswith("extended")
    if extended:
        depth = check_int(2 if depth is None else depth, name="depth", low=2)
        required = lambda_keys(model, depth)
    else:
        if depth not in (None, 1):
            raise ValueError(f"depth applies to the extended models only, got depth={depth} for {model!r}")
        depth = 1
        required = lambda_keys(model)
    defaults: dict[str, BiasMode] = {"mse-bias": "free", "mse-regbias": "ridge"}
    default_bias = defaults.get(model, "none")
    if bias is None:
        bias = default_bias
    if bias not in ("none", "free", "ridge"):
        raise ValueError(f"bias must be 'none', 'free' or 'ridge', got {bias!r}")
    if model.startswith("mse-") and bias != default_bias:
        raise ValueError(f"{model!r} fixes the bias mode to {default_bias!r}; choose the model name instead")
    if bias == "ridge" and "b" not in required:
        required = (*required, "b")
    missing = [k for k in required if k not in lams_c]
    if missing:
        raise ValueError(f"model {model!r} needs lambdas {list(required)}; missing {missing}")
    extra = sorted(set(lams_c) - set(required))
    if extra:
        hint = " (the free-bias model has no bias penalty: use 'mse-regbias')" if "b" in extra else ""
        raise ValueError(f"model {model!r} takes lambdas {list(required)}; unexpected {extra}{hint}")
    if loss is None:
        loss = "ce" if model == "ce-wd" else "mse"
    if loss not in ("mse", "ce"):
        raise ValueError(f"loss must be 'mse' or 'ce', got {loss!r}")
    if model == "ce-wd" and loss != "ce":
        raise ValueError("'ce-wd' is the cross-entropy model; use 'mse-bias-free' for MSE")
    if model in ("mufm", "ridge") and loss != "mse":
        raise ValueError(
            f"{model!r} is implemented for the MSE loss only "
            "([Wang et al. 2024, Thm. 4] / [Tirer & Bruna 2022, eq. (25)])"
        )
    N = K * n
    Xa = None
    fixed: dict[str, np.ndarray] = {}
    if model == "mufm":
        if X is None:
            raise ValueError("'mufm' needs the data X (Kn, d), class-major (see nclab.ufm.mufm.gaussian_data)")
        Xa = _balanced_array(X, "X", K, n, d)
    elif X is not None:
        raise ValueError(f"X (the MUFM data) does not apply to {model!r}")
    if model == "ridge":
        if H is None:
            raise ValueError("'ridge' needs the fixed features H (Kn, d), class-major")
        fixed["H"] = _balanced_array(H, "H", K, n, d)
    elif H is not None:
        raise ValueError(f"fixed features H apply to the 'ridge' model only, not {model!r}")
    activation: Literal["linear", "relu"] = "relu" if model == "extended-relu" else "linear"
    del N
    return ModelSpec(model, K, n, d, depth, activation, loss, bias, lams_c, Xa, fixed)


def as_spec(problem: ModelSpec | str, **spec_options: Any) -> ModelSpec:
    """The UFM problem ``problem`` as a :class:`ModelSpec`: a spec is returned as it is; a model name is built with
    :func:`make_spec` from ``spec_options`` (``K``, ``n``, ``d``, ``lams``, ``convention``, ...). The one place where
    the closed forms and the solvers turn their ``problem`` argument into a spec.

    Parameters
    ----------
    problem : ModelSpec or str
        A spec, or a model name of :data:`UFM_MODELS`.
    **spec_options
        :func:`make_spec`'s keywords, with a model name only.

    Returns
    -------
    ModelSpec

    Raises
    ------
    TypeError
        A spec with ``spec_options`` (they would be ignored), or a ``problem`` of another type.

    Examples
    --------
    >>> spec = as_spec("mse-bias", K=3, n=2, d=4, lams={"W": 0.01, "H": 0.01})
    >>> as_spec(spec) is spec
    True
    """
    if isinstance(problem, ModelSpec):
        if spec_options:
            raise TypeError(f"a ModelSpec carries its own options; got {sorted(spec_options)} as well")
        return problem
    if isinstance(problem, str):
        return make_spec(problem, **spec_options)
    raise TypeError(f"problem must be a ModelSpec or a model name, got {type(problem).__name__}")


def _balanced_array(A: Any, name: str, K: int, n: int, d: int) -> np.ndarray:
    """``A`` as float64 ``(K n, d)``; a wrong row count means the data are not balanced class-major."""
    arr = np.array(A, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (K*n, d), got shape {arr.shape}")
    if arr.shape[0] != K * n:
        raise ValueError(
            f"{name} has {arr.shape[0]} rows, but a balanced class-major UFM with K={K}, n={n} needs K*n={K * n} "
            "(n samples of class 0, then class 1, ...)"
        )
    if arr.shape[1] != d:
        raise ValueError(f"{name} has {arr.shape[1]} columns, expected d={d}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def default_init_scale(spec: ModelSpec) -> dict[str, float]:
    """The papers' GD initialisation scales (std of i.i.d. normal entries).

    Two-factor models ([Tirer & Bruna 2022] Thms 3.1/3.2 experiments, [Wang et al. 2024, Sec. IV-B]): N(0, 1) for every
    tensor.
    Extended linear [Tirer & Bruna 2022, Sec. 6]: 0.1 N(0, 1). Extended ReLU (Appendix G): W's 0.1, H1 0.2.
    """
    keys = spec.param_keys
    if spec.depth == 1:
        return dict.fromkeys(keys, 1.0)
    scales = dict.fromkeys(keys, 0.1)
    if spec.activation == "relu":
        scales["H1"] = 0.2
    return scales


def init_params(
    spec: ModelSpec, rng: np.random.Generator, scale: float | Mapping[str, float] | None = None
) -> dict[str, np.ndarray]:
    """I.i.d. normal parameters (``scale``: a float for all, a per-tensor dict, or the papers' defaults)."""
    scales = default_init_scale(spec)
    if isinstance(scale, Mapping):
        unknown = set(scale) - set(scales)
        if unknown:
            raise ValueError(f"init scale for unknown parameters {sorted(unknown)}; known {sorted(scales)}")
        scales.update({k: float(v) for k, v in scale.items()})
    elif scale is not None:
        scales = dict.fromkeys(scales, float(scale))
    out = {k: scales[k] * rng.standard_normal(shape) for k, shape in spec.shapes().items()}
    out.update({k: v.copy() for k, v in spec.fixed.items()})
    return out


@dataclass
class Evaluation:
    """Objective value, its additive terms (``"data"`` and one ``"reg_<key>"`` each), gradients."""

    loss: float
    terms: dict[str, float]
    grads: dict[str, np.ndarray]
    logits: np.ndarray
    levels: list[np.ndarray]  # F_0 (features), then per hidden layer: pre-activation Z_l and F_l


def _softmax(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = Z.max(axis=1, keepdims=True)
    E = np.exp(Z - m)
    s = E.sum(axis=1, keepdims=True)
    return E / s, (m + np.log(s))[:, 0]


def evaluate(spec: ModelSpec, params: Mapping[str, np.ndarray], grad: bool = True) -> Evaluation:
    """Objective (module docstring formula) and analytic gradients of every free parameter.

    Fixed parameters (the ``ridge`` model's features) get no gradient. Shapes are those of
    :meth:`ModelSpec.shapes`.

    Parameters
    ----------
    spec : ModelSpec
        The model.
    params : mapping of str to ndarray
        Every key of ``spec.param_keys``: features ``(K n, d)`` class-major, layers in ``nn.Linear`` layout,
        classifier ``W (K, d)``, bias ``b (K,)``.
    grad : bool, default=True
        Compute the gradients (else ``grads`` is empty).

    Returns
    -------
    Evaluation
        The objective ``loss``, its additive ``terms`` (``"data"``, ``"reg_<key>"``), the ``grads``, the logits
        ``(K n, K)`` and every feature level.

    Examples
    --------
    At the origin the MSE data term is ``1/(2Kn) ||Y||^2 = 1/2`` and every ridge term 0:

    >>> import numpy as np
    >>> from nclab.ufm import evaluate, make_spec
    >>> spec = make_spec("mse-bias-free", K=3, n=2, d=4, lams={"W": 0.01, "H": 0.01})
    >>> ev = evaluate(spec, {"H": np.zeros((6, 4)), "W": np.zeros((3, 4))})
    >>> ev.loss, ev.terms
    (0.5, {'data': 0.5, 'reg_H': 0.0, 'reg_W': 0.0})
    """
    N = spec.N
    Y = spec.targets
    F = np.asarray(params[spec.feature_key], dtype=np.float64)
    levels = [F]
    pre: list[np.ndarray] = []
    Ws = [np.asarray(params[k], dtype=np.float64) for k in spec.weight_keys]
    for Wl in Ws[:-1]:
        Zl = F @ Wl.T
        pre.append(Zl)
        F = np.maximum(Zl, 0.0) if spec.activation == "relu" else Zl
        levels += [Zl, F] if spec.activation == "relu" else [F]
    Wc = Ws[-1]
    Z = F @ Wc.T
    b = np.asarray(params["b"], dtype=np.float64) if spec.bias != "none" else None
    if b is not None:
        Z = Z + b
    if spec.loss == "mse":
        R = Z - Y
        data = 0.5 * float(np.einsum("ij,ij->", R, R)) / N
        GZ = R / N
    else:
        P, lse = _softmax(Z)
        data = float(np.mean(lse - np.einsum("ij,ij->i", Z, Y)))
        GZ = (P - Y) / N
    terms = {"data": data}
    for key in spec.param_keys:
        lam = spec.lam(key)
        if lam == 0.0 or key in spec.fixed:
            continue
        A = np.asarray(params[key], dtype=np.float64)
        if key == spec.feature_key and spec.X is not None:
            A = A - spec.X
        terms[f"reg_{key}"] = 0.5 * lam * float(np.vdot(A, A))
    loss = float(sum(terms.values()))
    grads: dict[str, np.ndarray] = {}
    if grad:
        free = set(spec.free_keys)
        ck = spec.classifier_key
        grads[ck] = GZ.T @ F + spec.lam(ck) * Wc
        if b is not None:
            grads["b"] = GZ.sum(axis=0) + spec.lam("b") * b
        GF = GZ @ Wc
        for i in range(len(Ws) - 2, -1, -1):
            if spec.activation == "relu":
                GF = GF * (pre[i] > 0)
            F_prev = levels[0] if i == 0 else _post(levels, i - 1, spec.activation)
            key = spec.weight_keys[i]
            grads[key] = GF.T @ F_prev + spec.lam(key) * Ws[i]
            GF = GF @ Ws[i]
        fk = spec.feature_key
        if fk in free:
            H = levels[0] if spec.X is None else levels[0] - spec.X
            grads[fk] = GF + spec.lam(fk) * H
        grads = {k: v for k, v in grads.items() if k in free}
    return Evaluation(loss, terms, grads, Z, levels)


def _post(levels: list[np.ndarray], i: int, activation: str) -> np.ndarray:
    """Post-activation features of hidden layer ``i`` (0-based) in the ``levels`` list."""
    return levels[2 + 2 * i] if activation == "relu" else levels[1 + i]
