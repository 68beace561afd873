"""CollapseMonitor: every number against a direct ClassStats / collapse_report computation on the same features,
the classifier detection rules, the schedule, and that measuring leaves the model as it found it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import nclab
from nclab.io.run_table import OUTPUT_LAYER, read_metrics
from nclab.measure import MeasurePlan, Schedule, find_classifier, measure_split
from nclab.metrics import collapse_report, ncc_metrics
from nclab.monitor import CLASSIFIER_METRICS, CollapseMonitor
from nclab.stats import ClassStats

K, D, N = 4, 6, 96


class FcNet(nn.Module):
    """torchvision-style: the classifier is ``fc`` and its input is a flattened pooled feature."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(D, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh())
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(8, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.drop(self.body(x)))


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(3)
    y = torch.arange(N) % K
    x = 2.0 * torch.randn(K, D, generator=g)[y] + torch.randn(N, D, generator=g)
    xt = torch.randn(40, D, generator=g) + 2.0 * torch.randn(K, D, generator=g)[torch.arange(40) % K]
    return x, y, xt, torch.arange(40) % K


@pytest.fixture()
def net(data):
    torch.manual_seed(0)
    model = FcNet()
    x, y, _, _ = data
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):  # BN running statistics and weights off their initial values
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


def _penultimate(model: FcNet, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        model.eval()
        h = model.body(x)
        model.train()
    return h


def _batches(x, y, size=25):
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(y), size)]


def _reference(H: torch.Tensor, y: torch.Tensor, model: FcNet, train: ClassStats | None = None, track="full"):
    stats = ClassStats.from_arrays(H.double().numpy(), y.numpy(), K, track=track)
    W, b = model.fc.weight.detach().double().numpy(), model.fc.bias.detach().double().numpy()
    ncc = ncc_metrics(train or stats, H, y, W=W, b=b)
    return collapse_report(stats, W=W, b=b, ncc=ncc)


def test_fc_classifier_is_found_and_every_metric_equals_a_direct_report(net, data):
    x, y, _, _ = data
    assert find_classifier(net, K).name == "fc"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a found classifier: no warning
        monitor = CollapseMonitor(net, K=K)
    res = monitor.measure(_batches(x, y), split="train", epoch=3)
    ref = _reference(_penultimate(net, x), y, net)
    got = res.reports["penultimate"]
    assert set(got) == set(ref)
    assert set(CLASSIFIER_METRICS) - {"ncc_mismatch_nobias"} <= set(got)  # NC3 / NC4 with no extra argument
    for met, v in ref.items():
        assert got[met] == pytest.approx(v, rel=1e-10, abs=1e-12), met
    with torch.no_grad():
        net.eval()
        wrong = float((net(x).argmax(1) != y).double().mean())
        net.train()
    assert res.value(OUTPUT_LAYER, "error") == wrong
    assert res.missing == ()
    assert {(r.epoch, r.split) for r in res.rows} == {(3, "train")}


def test_held_out_split_ncc_uses_the_training_means(net, data):
    x, y, xt, yt = data
    monitor = CollapseMonitor(net, K=K)
    train = monitor.measure(_batches(x, y), split="train", epoch=0)
    test = monitor.measure(iter(_batches(xt, yt, 16)), split="test", epoch=0)  # a one-shot iterator
    ref = _reference(_penultimate(net, xt), yt, net, train=train.stats["penultimate"])
    for met in ("ncc_accuracy", "ncc_mismatch", "nc1", "self_duality", "classifier_accuracy"):
        assert test.value("penultimate", met) == pytest.approx(ref[met], rel=1e-10, abs=1e-12), met


def test_no_classifier_warns_naming_the_missing_metrics(data):
    x, y, _, _ = data
    torch.manual_seed(1)
    body = nn.Sequential(nn.Linear(D, 8), nn.Tanh(), nn.Linear(8, 7))  # 7 outputs: not a K-way classifier
    with pytest.warns(UserWarning, match="self_duality.*ncc_mismatch"):
        monitor = CollapseMonitor(body, K=K, layers=["1"])
    res = monitor.measure((x, y), epoch=0)
    assert res.missing == CLASSIFIER_METRICS
    assert any("missing" in w and "self_duality" in w for w in res.warnings)
    got = res.reports["1"]
    assert not set(CLASSIFIER_METRICS) & set(got)
    with torch.no_grad():
        H = body[1](body[0](x))
    ref = collapse_report(
        ClassStats.from_arrays(H.double().numpy(), y.numpy(), K),
        ncc=ncc_metrics(ClassStats.from_arrays(H.double().numpy(), y.numpy(), K), H, y),
    )
    for met, v in ref.items():
        assert got[met] == pytest.approx(v, rel=1e-10, abs=1e-12), met


def test_classifier_given_as_pair_or_parameter_name(net, data):
    x, y, _, _ = data
    by_name = CollapseMonitor(net, K=K, classifier="fc.weight", layers=["body"])
    pair = CollapseMonitor(net, K=K, classifier=(net.fc.weight, net.fc.bias), layers=["body"])
    a, b = by_name.measure((x, y)), pair.measure((x, y))
    assert by_name.classifier.name == "fc"
    assert a.reports["body"] == b.reports["body"]
    ref = _reference(_penultimate(net, x), y, net)
    assert a.value("body", "self_duality") == pytest.approx(ref["self_duality"], rel=1e-10)


def test_mode_and_grad_state_are_restored(net, data):
    x, y, _, _ = data
    net.train()
    net.body[1].eval()  # a frozen batch norm inside a training model stays frozen
    monitor = CollapseMonitor(net, K=K)
    with torch.enable_grad():
        monitor.measure(_batches(x, y))
        assert torch.is_grad_enabled()
    assert net.training and net.drop.training and not net.body[1].training
    net.eval()
    monitor.measure(_batches(x, y))
    assert not any(m.training for m in net.modules())


def test_track_per_layer_and_regex_layers(net, data):
    x, y, _, _ = data
    monitor = CollapseMonitor(net, K=K, layers=r"body\.[14]", track={"body.1": "full"})
    assert list(monitor.layers) == ["body.1", "body.4"] and monitor.penultimate == "body.4"
    res = monitor.measure((x, y))
    assert "nc1" in res.reports["body.1"] and "nc1" in res.reports["body.4"]
    light = CollapseMonitor(net, K=K, layers=["body.1", "penultimate"], track="light").measure((x, y))
    assert "nc1" not in light.reports["body.1"] and "nc1" not in light.reports["penultimate"]
    full = _reference(_penultimate(net, x), y, net, track="light")
    assert light.value("penultimate", "trace_ratio") == pytest.approx(full["trace_ratio"], rel=1e-10)


def test_bfloat16_model_accumulates_in_float64(net, data):
    x, y, _, _ = data
    model = net.to(torch.bfloat16)
    res = CollapseMonitor(model, K=K).measure([(x.bfloat16(), y)])
    with torch.no_grad():
        model.eval()
        H = model.body(x.bfloat16())
    ref = _reference(H, y, model)
    assert res.stats["penultimate"].means.dtype == np.float64
    for met in ("nc1", "trace_ratio", "self_duality", "ncc_accuracy"):
        assert res.value("penultimate", met) == pytest.approx(ref[met], rel=1e-9, abs=1e-12), met


def test_schedule_sinks_and_top_level_export(net, data, tmp_path):
    x, y, _, _ = data
    assert nclab.CollapseMonitor is CollapseMonitor
    monitor = CollapseMonitor(net, K=K, schedule=Schedule.log(100, 5), out=tmp_path)
    done = [e for e in range(101) if monitor.maybe_measure(_batches(x, y), epoch=e) is not None]
    assert done == [0, 1, 3, 10, 32, 100]
    assert CollapseMonitor(net, K=K, schedule=[2, 7]).due(7)
    table = read_metrics(tmp_path)
    assert table == monitor.rows and sorted({r.epoch for r in table}) == done


def test_kept_features_give_the_streamed_result_and_survive_inplace_ops(data):
    """Pass 1 keeps a copy of the features for the NCC pass while they fit (cache_mb): the report equals the
    two-forward-pass one (cache_mb=0) and the one whose budget runs out mid-pass; an in-place ReLU after the
    measured Linear does not reach the kept copy (the statistics stay those of the pre-activation)."""
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(D, 16), nn.ReLU(inplace=True), nn.Linear(16, K))
    x, y, *_ = data
    batches = [(x[i : i + 16], y[i : i + 16]) for i in range(0, N, 16)]
    one_batch_mb = 16 * 16 * 4 / 2**20  # layer "0": 16 rows x 16 floats per batch
    got = {
        mb: CollapseMonitor(net, K, layers=["0", "penultimate"], track="full", cache_mb=mb).measure(batches).reports
        for mb in (0.0, 2.5 * one_batch_mb, 256.0)
    }
    for mb in (2.5 * one_batch_mb, 256.0):
        for layer, rep in got[0.0].items():
            for key, v in rep.items():
                assert got[mb][layer][key] == pytest.approx(v, rel=1e-12, abs=1e-14), (mb, layer, key)
    pre = ClassStats(K, 16, track="full")
    with torch.no_grad():
        pre.update(net[0](x), y)
    assert got[256.0]["0"]["nc1"] == pytest.approx(collapse_report(pre)["nc1"], rel=1e-12)
    with pytest.raises(ValueError, match="cache_mb"):
        CollapseMonitor(net, K, cache_mb=-1)


def test_cosine_head_reports_gnc1_as_measure_split(data):
    """An nclab network with a cosine head: the monitor reports gnc1 (of the unit-normalised penultimate
    features) and every other row as measure_split does."""
    from nclab.nets import build_model

    torch.manual_seed(2)
    model = build_model("mlp", (D,), K, widths=[12, 8], head={"kind": "cosine", "tau": 0.1})
    x, y, *_ = data
    # every layer is narrower than FULL_TRACK_MAX_DIM: the monitor measures all of them in full
    plan = MeasurePlan.of(model, K, batch_size=32, full_layers="all")
    ref = {(lay, met): v for lay, met, v in measure_split(model, (x, y), plan).rows}
    res = CollapseMonitor(model, K, layers=list(model.measured_layers())).measure([(x[:50], y[:50]), (x[50:], y[50:])])
    got = {(r.layer, r.metric): r.value for r in res.rows}
    assert ("penultimate" not in res.reports) and (model.penultimate_name, "gnc1") in got
    assert set(got) == set(ref)
    for key, v in ref.items():
        assert got[key] == pytest.approx(v, rel=1e-10, abs=1e-12), key


def test_layers_up_to_full_track_max_dim_are_full_and_wider_ones_warn_once(data):
    """ux-2 task 2: every requested layer of width d <= FULL_TRACK_MAX_DIM gets NC1 (the boundary d = 1,024
    included), equal to a direct computation; a wider one is light with one warning naming it, d and the fix."""
    from nclab.measure import FULL_TRACK_MAX_DIM

    assert FULL_TRACK_MAX_DIM == 1024
    torch.manual_seed(4)
    net = nn.Sequential(
        nn.Linear(D, FULL_TRACK_MAX_DIM), nn.Tanh(), nn.Linear(FULL_TRACK_MAX_DIM, FULL_TRACK_MAX_DIM + 1), nn.Tanh()
    )
    net.append(nn.Linear(FULL_TRACK_MAX_DIM + 1, 8)).append(nn.Tanh()).append(nn.Linear(8, K))
    x, y, *_ = data
    monitor = CollapseMonitor(net, K, layers=["0", "2", "penultimate"])
    assert monitor.tracks == {"0": "auto", "2": "auto", "penultimate": "full"}
    with pytest.warns(UserWarning) as record:
        res = monitor.measure(_batches(x, y), epoch=0)
    said = [str(w.message) for w in record]
    assert said == [
        "CollapseMonitor: layer '2' (d = 1025 > FULL_TRACK_MAX_DIM = 1024) is measured light: no nc1, vci or ranks "
        "there; pass track={'2': 'full'} to measure it in full (a d x d scatter of 8.02 MiB)"
    ]
    assert res.warnings == [said[0].removeprefix("CollapseMonitor: ")]
    assert monitor.tracks == {"0": "full", "2": "light", "penultimate": "full"}
    with torch.no_grad():
        h0 = net[0](x)  # layer "0": the first Linear's output
    direct = collapse_report(ClassStats.from_arrays(h0.double().numpy(), y.numpy(), K))
    assert res.value("0", "nc1") == pytest.approx(direct["nc1"], rel=1e-9)
    assert res.value("0", "vci") == pytest.approx(direct["vci"], rel=1e-9)
    assert "nc1" not in res.reports["2"] and "trace_ratio" in res.reports["2"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per monitor
        again = monitor.measure(_batches(x, y), epoch=1)
    assert again.warnings == [] and "nc1" not in again.reports["2"]
    asked = CollapseMonitor(net, K, layers=["0", "2", "penultimate"], track={"2": "full", "0": "light"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit choice is not warned about
        full = asked.measure(_batches(x, y))
    assert "nc1" in full.reports["2"] and "nc1" not in full.reports["0"]
    assert asked.tracks == {"0": "light", "2": "full", "penultimate": "full"}


def test_settings_name_what_is_measured(net, data):
    x, y, *_ = data
    monitor = CollapseMonitor(
        net, K, layers=["body.1", "penultimate"], schedule=[0, 4], conventions={"weighting": "empirical"}
    )
    monitor.measure((x, y))
    assert monitor.settings == {
        "K": K,
        "layers": ["body.1", "penultimate"],
        "penultimate": "penultimate",
        "classifier": "fc",
        "schedule": "Schedule(at [0, 4])",
        "track/body.1": "full",
        "track/penultimate": "full",
        **{f"conventions/{k}": v for k, v in nclab.metrics.DEFAULT_CONVENTIONS.items()},
        "conventions/weighting": "empirical",
        "run_id": monitor.identity.run_id,
        "run_name": "FcNet",
    }


def test_results_read_back_as_rows_and_frames(tmp_path, net, data, monkeypatch):
    """``nclab.read_metrics(run_dir)`` (through read_run) and ``MonitorResult.to_frame()``: the measured rows,
    bit for bit, with the run's id; pandas only for frames."""
    import sys

    pd = pytest.importorskip("pandas")
    x, y, xt, yt = data
    with CollapseMonitor(net, K, out=tmp_path / "run") as monitor:
        res = monitor.measure((x, y), epoch=0)
        held = monitor.measure((xt, yt), split="test", epoch=0)
        later = monitor.measure((x, y), epoch=3)
    table = nclab.read_metrics(tmp_path / "run")
    assert list(table) == monitor.rows and isinstance(table[0], nclab.io.MetricRow)
    assert table.run_id == monitor.identity.run_id and table.penultimate == "penultimate"
    assert table.series("nc1") == {0: res.value("penultimate", "nc1"), 3: later.value("penultimate", "nc1")}
    assert table.series("error", layer="output", split="test") == {0: held.value("output", "error")}
    with pytest.raises(KeyError, match=r"no 'nc2' at layer 'penultimate' on 'train'; measured there: .*nc1"):
        table.series("nc2")
    frame = table.to_frame()
    assert frame.columns.tolist() == ["run_id", "epoch", "split", "layer", "metric", "value"]
    assert len(frame) == len(monitor.rows) and set(frame["run_id"]) == {monitor.identity.run_id}
    pivot = frame.pivot_table(index="epoch", columns=["split", "metric"], values="value")
    assert pivot.loc[3, ("train", "nc1")] == later.value("penultimate", "nc1")
    one = res.to_frame()
    assert one.columns.tolist() == ["epoch", "split", "layer", "metric", "value"] and len(one) == len(res.rows)
    assert one.set_index(["layer", "metric"])["value"].to_dict() == {(r.layer, r.metric): r.value for r in res.rows}
    assert isinstance(monitor.to_frame(), pd.DataFrame) and len(monitor.to_frame()) == len(monitor.rows)
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an environment without pandas imports
    with pytest.raises(ImportError, match="needs pandas"):
        res.to_frame()
    assert nclab.read_metrics(tmp_path / "run") == table  # rows need no pandas
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.yaml").write_text("name: s\n")
    with pytest.raises(ValueError, match="is a sweep, not a run"):
        nclab.read_metrics(tmp_path / "sweep")


def test_a_layer_too_wide_for_full_statistics_is_refused_before_allocating(data, monkeypatch):
    """The default measures a 20,000-wide layer light (a warning); asking for full there is refused by the memory
    check before the 3.2 GB scatter is allocated, naming the way out."""
    from nclab.memory import AllocationTooLarge

    monkeypatch.setenv("NCLAB_MAX_BYTES", "1G")
    torch.manual_seed(5)
    net = nn.Sequential(nn.Linear(D, 20_000), nn.ReLU(), nn.Linear(20_000, K))
    x, y, *_ = data
    with pytest.warns(UserWarning, match=r"layer '0' \(d = 20000 > FULL_TRACK_MAX_DIM = 1024\) is measured light"):
        res = CollapseMonitor(net, K, layers=["0", "penultimate"], track={"penultimate": "light"}).measure((x, y))
    assert "trace_ratio" in res.reports["0"] and "nc1" not in res.reports["0"]
    with pytest.raises(AllocationTooLarge, match=r"ClassStats\(K=4, d=20000, track='full'\).*track='light'"):
        CollapseMonitor(net, K, layers=["0", "penultimate"], track={"0": "full"}).measure((x, y))
