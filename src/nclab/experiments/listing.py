"""What ``nclab experiment list`` shows, computed once and kept beside the code.

Listing the experiments means resolving every scale's run configs and estimating the paper scales' GPU cost, which
imports the whole library (torch included) and takes several seconds. The listing depends on the code only, so it
is computed by :func:`compute_listing` and stored in ``listing.json`` next to this module;
``nclab experiment list`` reads that file (a fraction of a second). ``tests/test_experiment_list.py`` fails when
the file differs from what the code computes, naming the command that rewrites it::

    python -m nclab.experiments.listing
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["LISTING_FILE", "compute_listing", "read_listing", "scale_info", "write_listing"]

#: The stored listing (package data: it ships in the wheel).
LISTING_FILE = Path(__file__).with_name("listing.json")


def scale_info(exp: Any, scale: str, protocols: list[Any] | None = None) -> dict[str, Any]:
    """What ``exp`` runs at ``scale`` (or ``protocols``, some of its runs): its protocols, the expected cost
    (measured wall time on 2 cores; for the paper scale of a training experiment, H200 GPU-hours estimated from
    measured throughput) and its data."""
    from nclab.experiments.protocols import data_needs, estimate

    protocols = exp.protocols(scale) if protocols is None else protocols
    est: dict[str, Any] = {"time_2_cores": exp.durations.get(scale, "not timed")}
    gpu = estimate(protocols) if scale == "paper" else None
    if gpu is not None:
        est.update(gpu.to_dict())
    return {
        "protocol": [p.to_dict() for p in protocols],
        "estimate": est,
        "data": data_needs(protocols),
        "runs": sum(len(p.seeds) for p in protocols if p.kind == "training"),
    }


def _where_as_rule(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with each dataset's ``where`` written as the rule nclab follows (``$NCLAB_DATA/<name>``,
    ``$NCLAB_DATA``, ``/usr/share/datasets/<name>``), not as this machine's folders: the stored listing is the
    same on every machine (``nclab experiment run NAME --dry-run`` resolves the folders)."""
    for info in item["scales"].values():
        for need in info["data"]:
            need["where"] = [f"$NCLAB_DATA/{need['name']}", "$NCLAB_DATA", f"/usr/share/datasets/{need['name']}"]
    return item


def compute_listing() -> list[dict[str, Any]]:
    """Per registered experiment: its name, papers, summary, measured times and, per scale, :func:`scale_info`
    (the ``-f json`` output of ``nclab experiment list``; where each dataset is looked for as a rule,
    :func:`_where_as_rule`)."""
    from nclab.experiments import list_experiments

    return [
        _where_as_rule(
            json.loads(
                json.dumps(
                    {
                        "name": exp.name,
                        "papers": exp.papers,
                        "paper": exp.paper,
                        "summary": exp.summary,
                        **{f"{s} time": exp.durations.get(s, "not timed") for s in ("tiny", "cpu", "paper")},
                        "scales": {s: scale_info(exp, s) for s in exp.scales},
                    },
                    default=str,
                )
            )
        )
        for exp in list_experiments()
    ]


def read_listing() -> list[dict[str, Any]] | None:
    """The stored listing, or ``None`` when there is none (a checkout that has not written it)."""
    if not LISTING_FILE.is_file():
        return None
    data: list[dict[str, Any]] = json.loads(LISTING_FILE.read_text(encoding="utf-8"))
    return data


def write_listing() -> Path:
    """Compute the listing and store it (atomically) in :data:`LISTING_FILE`."""
    from nclab.io.atomic import atomic_write_text

    text = json.dumps(compute_listing(), indent=1, sort_keys=False) + "\n"
    return atomic_write_text(LISTING_FILE, text)


if __name__ == "__main__":
    print(f"wrote {write_listing()}")
