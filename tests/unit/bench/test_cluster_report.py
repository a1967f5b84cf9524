"""bench.report's cluster part (issue 34): node-0's figures against N, the 10 % check and the
5,000-node extrapolation from the measured slopes; and the records of two runs merged."""

from __future__ import annotations

from typing import Any

from bench import cluster
from bench.report import cluster_lines, merged, node_figures


def point(nodes: int, *, daemon_kib: float = 60.0, rss: float = 34.0) -> dict[str, Any]:
    steady_pass = {"seconds": 0.2, "cpu_seconds": 0.1, "requests_total": 4, "bytes": 140 * 1024}
    return {
        "nodes": nodes,
        "shadows": nodes * 64 + 256,
        "claims": nodes * 8 + 32,
        "driver": {
            "steady": [steady_pass] * 3,
            "startup": {**steady_pass, "requests_total": 9},
            "per_min": {"requests": 8.0, "bytes": 280 * 1024},
            "peak_rss_mib": 110.0,
        },
        "daemon": {
            "startup": {"seconds": 0.4, "bytes": 120 * 1024, "rss_mib": rss, "audit": {"list pods": 1},
                        "nads_held": 257},
            "steady": {"window_seconds": 20.0, "bytes_per_min": daemon_kib * 1024, "cpu_seconds_per_min": 0.1,
                       "rss_mib": rss, "audit": {}, "changed_here": 8, "changed_elsewhere": nodes * 64 // 100},
        },
    }  # fmt: skip


def record(*points: dict[str, Any]) -> dict[str, Any]:
    return {"node0_pods": 32, "vfs": 8, "pods_per_node": 8, "series": list(points)}


def test_flat_figures_are_met_and_the_extrapolation_counts_every_node() -> None:
    text = "\n".join(cluster_lines(record(point(10), point(1000))))
    assert "MISSED" not in text and text.count(" met") == 7
    # 5000 nodes x (8 driver + 0 daemon requests a minute) / 60
    assert "send the API server 729 requests/s" in text
    # 8 changes in 20 s on each node, each event sent to its own node only
    assert "2000 events/s to all nodes together" in text
    assert "N = 1000: driver 9 requests, 140 KiB" in text


def test_a_figure_that_grows_with_the_cluster_is_missed_and_extrapolated_along_its_slope() -> None:
    grows = record(point(10, daemon_kib=60.0), point(1000, daemon_kib=600.0))
    text = "\n".join(cluster_lines(grows))
    assert "daemon KiB/min 60.0 -> 600.0 MISSED" in text
    slope = (600.0 - 60.0) / 990
    per_node = 600.0 + slope * 4000 + 280.0
    assert f"read {5000 * per_node / 1024 / 60:.1f} MiB/s" in text
    assert node_figures(grows["series"][1])["daemon_kib_min"] == 600.0


def test_the_code_before_is_a_row_of_its_own() -> None:
    p = point(10)
    p["before"] = {"driver": p["driver"], "daemon": point(10, rss=500.0)["daemon"]}
    text = "\n".join(cluster_lines(record(p)))
    assert "| 10 *before* |" in text and "hold 500 MiB" in text


def test_records_merge_with_later_parts_winning() -> None:
    first = {
        "date": "d1",
        "machine": {"cores": 2},
        "results": {"cni": 1, "cluster": 2},
        "seconds": {"cni": 5},
    }
    second = {"date": "d2", "results": {"cluster": 3}, "seconds": {"cluster": 9}}
    out = merged([first, second])
    assert out["results"] == {"cni": 1, "cluster": 3} and out["date"] == "d1"
    assert out["seconds"] == {"cni": 5, "cluster": 9}


def test_the_series_and_the_operator_size_from_their_flags() -> None:
    assert cluster.series("", quick=False) == list(cluster.DEFAULT_SERIES)
    assert cluster.series("", quick=True) == list(cluster.QUICK_SERIES)
    assert cluster.series("10,100,1000", quick=True) == [10, 100, 1000]
    assert cluster.series("0", quick=False) == []
    assert cluster.operator_size("500x1000") == (500, 1000) and cluster.operator_size("") is None
