"""The reporter's write discipline with an in-memory cluster (the API behaviour is in
tests/integration/operator/test_node_state.py)."""

from collections.abc import Mapping
from typing import Any

from sriov_operator.controllers.nodestate import NodeStateReporter
from sriov_operator.core.nodestate import PfReading
from sriov_operator.reasons import API_REQUEST_FAILED, NODE_INVENTORY_UNREADABLE, ApiError, OperatorError

PF = PfReading("ens1f0", "0000:03:00.0", "15b3", "1017", "ETH", 0, 8, ())


class Cluster:
    def __init__(self) -> None:
        self.state: dict[str, Any] | None = None
        self.calls: list[str] = []
        self.fail_patch = False

    def get_node_state(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append("get")
        return self.state

    def create_node_state(self, namespace: str, name: str) -> None:
        self.calls.append("create")
        self.state = {"metadata": {"name": name, "namespace": namespace}}

    def patch_node_state_status(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        self.calls.append("patch")
        if self.fail_patch:
            raise ApiError(API_REQUEST_FAILED, "PATCH failed with HTTP 500", status=500)
        assert self.state is not None
        self.state["status"] = dict(body["status"])


def reporter(cluster: Cluster, pfs: list[PfReading]) -> NodeStateReporter:
    return NodeStateReporter(cluster, namespace="ops", node_name="n1", read_inventory=lambda: pfs)


def test_creates_then_reports_and_an_unchanged_node_writes_nothing() -> None:
    cluster = Cluster()
    pfs = [PF]
    r = reporter(cluster, pfs)
    assert r.reconcile()
    assert cluster.calls == ["get", "create", "patch"]
    assert cluster.state is not None and cluster.state["status"]["interfaces"][0]["name"] == "ens1f0"
    cluster.calls.clear()
    assert r.reconcile()
    assert cluster.calls == ["get"]
    assert r.writes == 2
    pfs.append(PfReading("ens2f0", "0000:04:00.0", "15b3", "1017", "ETH", 0, 8, ()))
    assert r.reconcile()
    assert cluster.calls == ["get", "get", "patch"]


def test_a_failed_write_or_read_fails_the_pass_for_a_retry() -> None:
    cluster = Cluster()
    cluster.fail_patch = True
    assert not reporter(cluster, [PF]).reconcile()

    def unreadable() -> list[PfReading]:
        raise OperatorError(NODE_INVENTORY_UNREADABLE, "no sysfs")

    calls = Cluster()
    assert not NodeStateReporter(
        calls, namespace="ops", node_name="n1", read_inventory=unreadable
    ).reconcile()
    assert calls.calls == []
