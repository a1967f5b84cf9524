"""API faults on the CNI side: the shim's own Kubernetes calls, faulted on the wire.

The real cni-shim (thin, and thick: shim + cni-shim-daemon with ``liveNetworkConfigOnAdd``) talks
to the real kube-apiserver through the fault proxy (testbed/faultproxy.py); the delegates are
the real ptp and host-local plugins in a real network namespace. Rows are the calls an ADD makes
(the live Pod GET, the NAD GET, the network-status PUT with its resourceVersion precondition and
the Pod re-GET after a 409) plus DEL, which must make none. Each phase of a cell is a fresh Pod,
container ID and network namespace; after the faulty ADD it asserts what the runtime got (CNI
error JSON with a stable reason and code, or a result), every call the proxy saw, what is
attached, reserved and cached, and that the runtime's DEL and a retry without the fault converge.

What a cell expects follows cni_shim/handler/add.py and Multus (reference multus.md sections 5 and 8):
a failed read fails the ADD before the delegate cache is written; only the Pod GET is retried
(transport errors, 500, 503 within POD_RETRY_BUDGET); a Pod 404, retried within the same budget
on ADD (the Pod may not be visible yet), is Multus's empty success; a
failed status write fails the ADD after every delegate succeeded, with no rollback, and the
runtime's DEL releases everything from the cache; only a 409 on the write is retried, re-reading
the Pod. Both API clients resend a request once its connection drops unanswered (the thin client
on a reused socket, urllib3 in the daemon on any connection), never after a timeout; a resent
status PUT carries the stale resourceVersion, so a lost-but-applied write comes back as a 409 and
is retried safely.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from kubernetes import client

from cni_shim.errors import INTERNAL, TRY_AGAIN_LATER
from cni_shim.handler import add as cni_add
from cni_shim.kube import paths
from sriov_contract import keys
from testbed import faults
from testbed.cni_daemon import shim_conf
from testbed.faultproxy import FaultProxy
from testbed.faults import Fault, RecordedRequest
from testbed.netlinks import ns_links
from tests.support.cni import CniRun, host_local_allocations
from tests.support.cni_daemon import pod_args, run_shim
from tests.support.faultmatrix import FAIL, NA, PASS

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.faults]

TITLES = {
    "thin": "CNI API, thin shim: call x fault (live reads through the fault proxy, ptp + host-local)",
    "thick": "CNI API, thick shim + daemon with liveNetworkConfigOnAdd: call x fault (the same)",
}
ROWS = ("Pod GET", "NAD GET", "status PUT", "status re-GET", "DEL")
COLUMNS = ("Forbidden", "NotFound", "timeout", "409", "500", "lost response")
# Plain `make test` runs these; `make faults` (-m faults) every cell.
FAST = {("thin", "Pod GET", "500"), ("thick", "status PUT", "409"), ("thick", "NAD GET", "timeout")}
# A regex over "<row> x <column>" that narrows the run to matching cells, e.g. "timeout".
ONLY = os.environ.get("FAULT_MATRIX_ONLY", "")

NAD_NAME = "side"
POD_NET, SIDE_NET = "podnet", "sidenet"
# Longer than any client timeout; the proxy frees a held request when it closes.
HOLD_S = 60.0
# The slowest faulty ADD is the Pod GET's whole retry budget, or one call held to its timeout. A
# resent held call would take at least two timeouts, so that is the bound: it leaves a loaded CI
# machine several seconds of slack and still catches the resend.
ADD_BUDGET_S = max(cni_add.POD_RETRY_BUDGET, 2 * paths.REQUEST_TIMEOUT)
PLACEHOLDER_IPS = [{"address": "0.0.0.0/0", "gateway": "0.0.0.0"}]

# The shim's calls, as ``_call`` writes them: "<verb> <kind> <status>", then "!" when the proxy
# answered instead of the apiserver, "held" for a request never answered, "lost" for one the
# apiserver answered and the proxy dropped.
GET_POD, GET_NAD, PUT_STATUS = "get pod 200", "get nad 200", "update pod/status 200"
PUT_CONFLICT = "update pod/status 409!"


def _fault(column: str) -> Fault:
    return {
        "Forbidden": faults.forbidden(),
        "NotFound": faults.not_found(),
        "timeout": faults.timeout(HOLD_S),
        "409": faults.conflict(),
        "500": faults.internal_error(),
        "lost response": faults.response_lost(),
    }[column]


Outcome = Literal["read fails", "placeholder", "ok", "status fails", "ok unwritten"]


@dataclass(frozen=True)
class Phase:
    """One faulty ADD: the fault fires ``times`` times (None: on every matching request)."""

    outcome: Outcome
    calls: tuple[str, ...]
    reason: str = ""
    code: int = 0
    times: int | None = None


def _refused(*calls: str, status_write: bool = False) -> Phase:
    return Phase("status fails" if status_write else "read fails", calls, "KubeApiRefused", INTERNAL)


def _unavailable(*calls: str, status_write: bool = False) -> Phase:
    return Phase(
        "status fails" if status_write else "read fails", calls, "KubeApiUnavailable", TRY_AGAIN_LATER
    )


def _reread(answer: str) -> tuple[str, ...]:
    """The first status PUT conflicts, so the shim reads the Pod again; that read gets ``answer``."""
    return (GET_POD, GET_NAD, PUT_CONFLICT, f"get pod {answer}")


_PERSISTENT_CONFLICT = (
    GET_POD,
    GET_NAD,
    PUT_CONFLICT,
    *(GET_POD, PUT_CONFLICT) * (cni_add.STATUS_WRITE_ATTEMPTS - 1),
)
_POD_RETRIES = "get pod 500! (retried until the budget ends)"
_POD_NOT_FOUND_RETRIES = "get pod 404! (retried until the budget ends)"

# (row, column) -> the phases of that cell, from the code and Multus; see the module docstring.
CELLS: dict[tuple[str, str], tuple[Phase, ...]] = {
    ("Pod GET", "Forbidden"): (_refused("get pod 403!"),),
    # A Pod not visible yet: ADD retries NotFound for POD_RETRY_BUDGET as Multus does, then the placeholder.
    ("Pod GET", "NotFound"): (Phase("placeholder", (_POD_NOT_FOUND_RETRIES,)),),
    ("Pod GET", "timeout"): (_unavailable("get pod held"),),
    ("Pod GET", "500"): (
        _unavailable(_POD_RETRIES),
        Phase("ok", ("get pod 500!", "get pod 500!", GET_POD, GET_NAD, PUT_STATUS), times=2),
    ),
    ("Pod GET", "lost response"): (Phase("ok", ("get pod 200 lost", GET_POD, GET_NAD, PUT_STATUS), times=1),),
    ("NAD GET", "Forbidden"): (_refused(GET_POD, "get nad 403!"),),
    ("NAD GET", "NotFound"): (
        Phase("read fails", (GET_POD, "get nad 404!"), "NoNetworkFound", TRY_AGAIN_LATER),
    ),
    ("NAD GET", "timeout"): (_unavailable(GET_POD, "get nad held"),),
    # No retry for a NAD read, as in Multus: the runtime's retry is the retry.
    ("NAD GET", "500"): (_unavailable(GET_POD, "get nad 500!"),),
    ("NAD GET", "lost response"): (Phase("ok", (GET_POD, "get nad 200 lost", GET_NAD, PUT_STATUS), times=1),),
    ("status PUT", "Forbidden"): (_refused(GET_POD, GET_NAD, "update pod/status 403!", status_write=True),),
    # Multus tolerates only the informer's NotFound text; a live 404 on the write fails the ADD too.
    ("status PUT", "NotFound"): (_refused(GET_POD, GET_NAD, "update pod/status 404!", status_write=True),),
    ("status PUT", "timeout"): (_unavailable(GET_POD, GET_NAD, "update pod/status held", status_write=True),),
    ("status PUT", "409"): (
        Phase("status fails", _PERSISTENT_CONFLICT, "KubeApiRefused", INTERNAL),
        Phase("ok", (GET_POD, GET_NAD, PUT_CONFLICT, GET_POD, PUT_STATUS), times=1),
    ),
    ("status PUT", "500"): (_unavailable(GET_POD, GET_NAD, "update pod/status 500!", status_write=True),),
    ("status PUT", "lost response"): (
        Phase(
            "ok",
            (GET_POD, GET_NAD, "update pod/status 200 lost", "update pod/status 409", GET_POD, PUT_STATUS),
            times=1,
        ),
    ),
    ("status re-GET", "Forbidden"): (_refused(*_reread("403!"), status_write=True),),
    # The Pod is gone by the time its status is written: nothing to write, the ADD stands.
    ("status re-GET", "NotFound"): (Phase("ok unwritten", _reread("404!")),),
    ("status re-GET", "timeout"): (_unavailable(*_reread("held"), status_write=True),),
    ("status re-GET", "500"): (_unavailable(*_reread("500!"), status_write=True),),
    ("status re-GET", "lost response"): (Phase("ok", (*_reread("200 lost"), GET_POD, PUT_STATUS), times=1),),
}


def _na_reason(row: str, column: str) -> str | None:
    if row == "DEL":
        return (
            None
            if column in ("500", "timeout")
            else "DEL makes no API call; its 500 and timeout cells prove it"
        )
    if column == "409" and row != "status PUT":
        return "a GET cannot conflict"
    return None


def selected(full: bool, mode: str, row: str, column: str) -> bool:
    if ONLY:
        return re.search(ONLY, f"{row} x {column}") is not None
    return full or (mode, row, column) in FAST


# --------------------------------------------------------------------------- the node and its Pods


def _delegates(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cluster network (in the shim config) and the Pod's one additional network (a NAD)."""

    def ptp(name: str, subnet: str) -> dict[str, Any]:
        ipam = {"type": "host-local", "subnet": subnet, "dataDir": str(tmp_path / "ipam")}
        return {"cniVersion": "1.0.0", "name": name, "type": "ptp", "ipam": ipam}

    return ptp(POD_NET, "10.81.0.0/24"), ptp(SIDE_NET, "10.82.0.0/24")


def _pod(namespace: str, name: str, node: str) -> dict[str, Any]:
    """A Pod already on the node (no scheduler, no kubelet) asking for the NAD by name."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {keys.NETWORKS_ANNOTATION: NAD_NAME},
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.invalid/none:0"}]},
    }


@dataclass(frozen=True)
class Sandbox:
    pod: str
    uid: str
    cid: str
    netns: str


@dataclass
class Node:
    """One mode's shim talking through the proxy, and what a cell inspects afterwards."""

    mode: str
    proxy: FaultProxy
    testbed: Any
    namespace: str
    tmp_path: Path
    make_netns: Callable[[], str]
    conf: dict[str, Any]
    bin_dir: Path
    _count: int = field(default=0)

    @property
    def ipam(self) -> Path:
        return self.tmp_path / "ipam"

    @property
    def cache(self) -> Path:
        return self.tmp_path / "cache"

    def sandbox(self) -> Sandbox:
        self._count += 1
        name = f"p{self._count}"
        (pod,) = self.testbed.apply([_pod(self.namespace, name, self.testbed.node_name)])
        return Sandbox(
            name, str(pod.metadata.uid), f"c{self._count}-{secrets.token_hex(3)}", self.make_netns()
        )

    def cni(self, command: str, sb: Sandbox) -> CniRun:
        args = pod_args(self.namespace, sb.pod, sb.uid)
        return run_shim(self.bin_dir, command, self.conf, sb.cid, args, sb.netns)

    def calls(self) -> list[str]:
        """The shim's own calls since the proxy was cleared (the daemon's informer lists and watches,
        and the Node read its shadow informer makes at each relist, left out)."""
        return [
            _call(r)
            for r in self.proxy.requests
            if r.verb not in ("list", "watch") and not (r.target is not None and r.target.resource == "nodes")
        ]

    def status_annotation(self, sb: Sandbox) -> list[dict[str, Any]] | None:
        pod = client.CoreV1Api(self.testbed.api_client).read_namespaced_pod(sb.pod, self.namespace)
        assert pod.metadata is not None
        value = (pod.metadata.annotations or {}).get(keys.NETWORK_STATUS_ANNOTATION)
        return json.loads(value) if value is not None else None

    def assert_untouched(self, sb: Sandbox) -> None:
        """No delegate is attached: no interface, no reservation, no delegate or result cache."""
        assert set(ns_links(sb.netns)) <= {"lo"}, f"interfaces left in the sandbox: {set(ns_links(sb.netns))}"
        for net in (POD_NET, SIDE_NET):
            assert sb.cid not in host_local_allocations(self.ipam, net).values(), f"{net} address leaked"
        assert not (self.cache / sb.cid).exists(), "a delegate cache was left behind"
        assert not list(self.cache.glob(f"results/*-{sb.cid}-*")), "a result cache was left behind"

    def assert_attached(self, sb: Sandbox) -> None:
        assert {"eth0", "net1"} <= set(ns_links(sb.netns)), f"not attached: {set(ns_links(sb.netns))}"
        for net in (POD_NET, SIDE_NET):
            assert list(host_local_allocations(self.ipam, net).values()) == [sb.cid], (
                f"{net}: {host_local_allocations(self.ipam, net)}"
            )
        assert (self.cache / sb.cid).exists(), "no delegate cache for the attached delegates"

    def assert_status_written(self, sb: Sandbox) -> None:
        status = self.status_annotation(sb)
        assert status is not None, "no network-status annotation on the Pod"
        assert [(s["name"], s.get("interface")) for s in status] == [
            (POD_NET, "eth0"),
            (f"{self.namespace}/{NAD_NAME}", "net1"),
        ], status

    def delete_and_assert_released(self, sb: Sandbox) -> None:
        """The runtime's DEL: everything released."""
        rm = self.cni("DEL", sb)
        assert rm.returncode == 0, f"DEL failed: {rm.stdout}{rm.stderr}"
        self.assert_untouched(sb)

    def retry_converges(self, sb: Sandbox) -> None:
        """Without the fault, the runtime's retried ADD succeeds and writes the status; DEL releases it."""
        again = self.cni("ADD", sb)
        assert again.returncode == 0, f"the retry failed: {again.stdout}"
        self.assert_attached(sb)
        self.assert_status_written(sb)
        self.delete_and_assert_released(sb)


def _call(r: RecordedRequest) -> str:
    t = r.target
    kind = (
        {"pods": "pod", "network-attachment-definitions": "nad"}.get(t.resource, t.resource) if t else r.path
    )
    sub = f"/{t.subresource}" if t is not None and t.subresource else ""
    if r.fault == "timeout":
        answer = "held"
    elif r.fault == "response-lost":
        answer = f"{r.status} lost"
    else:
        answer = f"{r.status}{'!' if r.fault else ''}"
    return f"{r.verb} {kind}{sub} {answer}"


# --------------------------------------------------------------------------- the cells


def _inject(node: Node, sb: Sandbox, row: str, fault: Fault, times: int | None) -> None:
    ns, add = node.namespace, node.proxy.add_rule
    if row == "Pod GET":
        add(fault, verb="get", resource="pods", namespace=ns, name=sb.pod, times=times)
    elif row == "NAD GET":
        add(
            fault,
            verb="get",
            resource="network-attachment-definitions",
            namespace=ns,
            name=NAD_NAME,
            times=times,
        )
    elif row == "status PUT":
        add(
            fault,
            verb="update",
            resource="pods",
            subresource="status",
            namespace=ns,
            name=sb.pod,
            times=times,
        )
    else:
        # The first write reuses the ADD's own live read; only a 409 makes the shim read the Pod again.
        add(
            faults.conflict(),
            verb="update",
            resource="pods",
            subresource="status",
            namespace=ns,
            name=sb.pod,
            times=1,
        )
        add(fault, verb="get", resource="pods", namespace=ns, name=sb.pod, after=1, times=times)


def _nad_calls(calls: list[str] | tuple[str, ...]) -> list[str]:
    return [c for c in calls if c.startswith("get nad")]


def _assert_calls(phase: Phase, calls: list[str], *, nads_overlap: bool) -> None:
    """With ``nads_overlap`` (the thick daemon's live ADD, cni_shim.core.prefetch) the NAD GETs run beside
    the first Pod GET: only the order among the NAD calls and among the other calls is fixed, and
    an ADD whose Pod read failed may have made the one NAD GET its informer copy named."""
    if nads_overlap:
        nads, expected_nads = _nad_calls(calls), _nad_calls(phase.calls)
        allowed = ([], [GET_NAD]) if not expected_nads else (expected_nads,)
        assert nads in allowed, f"NAD calls {nads} in {calls}, expected one of {allowed}"
        calls = [c for c in calls if c not in nads]
    if phase.calls in ((_POD_RETRIES,), (_POD_NOT_FOUND_RETRIES,)):
        limit = int(cni_add.POD_RETRY_BUDGET / cni_add.POD_RETRY_INTERVAL) + 1
        answer = phase.calls[0].split(" (", 1)[0]
        assert set(calls) == {answer} and 3 <= len(calls) <= limit, f"retries within the budget: {calls}"
        return
    expected = [c for c in phase.calls if not (nads_overlap and c.startswith("get nad"))]
    assert calls == expected, f"calls {calls}, expected {expected}"


def _run_phase(node: Node, row: str, column: str, phase: Phase) -> None:
    sb = node.sandbox()
    node.proxy.clear()
    _inject(node, sb, row, _fault(column), phase.times)
    started = time.monotonic()
    add = node.cni("ADD", sb)
    took = time.monotonic() - started
    calls = node.calls()
    node.proxy.clear()  # the fault is gone: the runtime's DEL and retry meet a healthy apiserver
    assert took < ADD_BUDGET_S, f"ADD took {took:.1f}s"
    _assert_calls(phase, calls, nads_overlap=node.mode == "thick")
    if phase.outcome in ("read fails", "status fails"):
        assert add.returncode == 1, f"ADD succeeded: {add.stdout}"
        err = json.loads(add.stdout)
        assert err["details"] == phase.reason and err["code"] == phase.code, err
    else:
        assert add.returncode == 0, f"ADD failed: {add.stdout}"
    if phase.outcome == "read fails":
        node.assert_untouched(sb)  # no delegate ran and no cache was written
        assert node.status_annotation(sb) is None
        node.delete_and_assert_released(sb)
        node.retry_converges(sb)
    elif phase.outcome == "placeholder":
        assert add.json["ips"] == PLACEHOLDER_IPS, add.stdout
        node.assert_untouched(sb)
        node.retry_converges(sb)
    elif phase.outcome == "status fails":
        node.assert_attached(sb)  # every delegate succeeded and nothing was rolled back
        assert node.status_annotation(sb) is None
        node.delete_and_assert_released(sb)
        node.retry_converges(sb)
    else:
        node.assert_attached(sb)
        if phase.outcome == "ok":
            node.assert_status_written(sb)
        else:
            assert node.status_annotation(sb) is None
        node.delete_and_assert_released(sb)


def _run_del(node: Node, column: str) -> None:
    """DEL works from the cache alone: an apiserver failing every request does not touch it."""
    sb = node.sandbox()
    add = node.cni("ADD", sb)
    assert add.returncode == 0, f"ADD failed: {add.stdout}"
    node.proxy.clear()
    node.proxy.add_rule(_fault(column))  # every request, to any resource
    started = time.monotonic()
    rm = node.cni("DEL", sb)
    took = time.monotonic() - started
    calls = node.calls()
    node.proxy.clear()
    assert rm.returncode == 0, f"DEL failed: {rm.stdout}{rm.stderr}"
    assert calls == [], f"DEL made API calls: {calls}"
    assert took < paths.REQUEST_TIMEOUT, f"DEL took {took:.1f}s"
    node.assert_untouched(sb)


def run_cell(node: Node, row: str, column: str) -> None:
    if row == "DEL":
        _run_del(node, column)
        return
    for phase in CELLS[(row, column)]:
        _run_phase(node, row, column, phase)


# --------------------------------------------------------------------------- the two tests


@pytest.fixture
def proxied(testbed, daemon_kubeconfig, fault_proxy: Callable[..., FaultProxy]) -> FaultProxy:
    """One proxy as the daemon's identity (Pod and NAD reads, pods/status update) for both modes."""
    return fault_proxy(identity="cni-shim-daemon")


def _setup(testbed, namespace: str, tmp_path: Path) -> dict[str, Any]:
    cluster, side = _delegates(tmp_path)
    nad = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": NAD_NAME, "namespace": namespace},
        "spec": {"config": json.dumps(side)},
    }
    testbed.apply([nad])
    return cluster


def _run_matrix(node: Node, fault_matrix) -> None:
    title = TITLES[node.mode]
    fault_matrix.table(title, ROWS, COLUMNS)
    failed = []
    for row in ROWS:
        for column in COLUMNS:
            reason = _na_reason(row, column)
            if reason is not None:
                fault_matrix.record(title, row, column, NA, reason)
                continue
            if not selected(fault_matrix.full, node.mode, row, column):
                continue
            try:
                run_cell(node, row, column)
            except AssertionError as exc:
                problem = (str(exc) or "assertion failed").splitlines()[0][:300]
                fault_matrix.record(title, row, column, FAIL, problem)
                failed.append(f"{row} x {column}: {problem}")
            else:
                fault_matrix.record(title, row, column, PASS)
    assert not failed, "\n".join(failed)


@pytest.mark.timeout(600)
def test_thin_shim_api_faults(
    testbed, k8s_namespace, proxied, thick_bin, netns, tmp_path, fault_matrix
) -> None:
    conf = {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "cni-shim",
        "kubeconfig": str(proxied.kubeconfig),
        "cniDir": str(tmp_path / "cache"),
        "binDir": "",
        "delegates": [_setup(testbed, k8s_namespace, tmp_path)],
        # The matrix counts the Pod, NAD and status requests of each fault; Pod Events are
        # best-effort writes with their own tests (tests/integration/cni_thick/test_pod_events.py).
        "podEvents": False,
    }
    _run_matrix(Node("thin", proxied, testbed, k8s_namespace, tmp_path, netns, conf, thick_bin), fault_matrix)


@pytest.mark.timeout(600)
def test_thick_shim_api_faults(
    testbed, k8s_namespace, proxied, cni_daemon, thick_bin, netns, tmp_path, fault_matrix
) -> None:
    cluster = _setup(testbed, k8s_namespace, tmp_path)
    daemon = cni_daemon(
        {
            "cniDir": str(tmp_path / "cache"),
            "binDir": str(thick_bin),
            "kubeconfig": str(proxied.kubeconfig),
            "liveNetworkConfigOnAdd": True,
            "podEvents": False,
        }
    )
    conf = shim_conf(daemon, delegates=[cluster])
    _run_matrix(
        Node("thick", proxied, testbed, k8s_namespace, tmp_path, netns, conf, thick_bin), fault_matrix
    )
