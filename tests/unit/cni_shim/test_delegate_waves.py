"""Delegates that run at once (issue 36): which may, and that running them at once changes nothing
but time. The property compares, over generated Pods, the serial order (maxParallelDelegates 1,
Multus's) with waves whose members finish in a generated order."""

from __future__ import annotations

import json
import random
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cni_shim.core import delegatewaves
from cni_shim.core.delegateplan import PlannedDelegate
from cni_shim.errors import CniError
from sriov_contract import keys
from sriov_lib.fanout import run as run_at_once
from testbed.managed_shadows import POD_UID, managed_shadow, registry_annotation
from tests.fakes.cni_ports import FakeExecutor
from tests.support.cni_shim import ShimHarness

T = TypeVar("T")
NS = "ns1"
ARGS = f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}"


def _d(name: str, *, managed: bool = False, master: bool = False, route: bool = False) -> PlannedDelegate:
    return PlannedDelegate(
        name=name, conf=b"{}", ifname=name, cni_version="1.0.0", master=master, managed=managed,
        route_override=route,
    )  # fmt: skip


CLUSTER = _d("eth0", master=True)


def test_the_cluster_network_runs_alone_and_first_and_managed_shadows_share_a_wave() -> None:
    plan = [CLUSTER, _d("dra0", managed=True), _d("dra1", managed=True), _d("net1"), _d("dra2", managed=True)]
    assert delegatewaves.waves(plan, limit=8, ordinary=False) == ((0,), (1, 2), (3,), (4,))
    assert delegatewaves.teardown_waves(plan, limit=8, ordinary=False) == ((4,), (3,), (2, 1), (0,))


def test_ordinary_nads_overlap_only_when_asked_and_a_default_route_never() -> None:
    plan = [CLUSTER, _d("net1"), _d("net2"), _d("net3", route=True), _d("dra0", managed=True)]
    assert delegatewaves.waves(plan, limit=8, ordinary=True) == ((0,), (1, 2), (3,), (4,))
    assert delegatewaves.waves(plan, limit=8, ordinary=False) == ((0,), (1,), (2,), (3,), (4,))


def test_a_limit_of_one_is_the_serial_order() -> None:
    plan = [CLUSTER, *(_d(f"dra{i}", managed=True) for i in range(4))]
    assert delegatewaves.waves(plan, limit=1, ordinary=True) == tuple((i,) for i in range(5))


def test_the_fanout_answers_in_task_order_and_hands_back_what_a_task_raised() -> None:
    def boom() -> int:
        raise ValueError("three")

    answers = run_at_once([lambda: 1, lambda: 2, boom, lambda: 4], 3)
    assert answers[:2] == [1, 2] and answers[3] == 4
    assert isinstance(answers[2], ValueError) and str(answers[2]) == "three"


def test_the_fanout_runs_up_to_its_limit_at_once_and_no_more() -> None:
    limit = 3
    # Every task waits until `limit` tasks are inside: only a fanout that runs them at once passes,
    # and a fanout running more at once would let a fourth task see more than `limit` inside.
    barrier = threading.Barrier(limit, timeout=30)
    inside, most, lock = 0, 0, threading.Lock()

    def task() -> int:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        barrier.wait()
        with lock:
            inside -= 1
        return threading.get_ident()

    answers = run_at_once([task] * (2 * limit), limit)
    assert not any(isinstance(a, BaseException) for a in answers), answers
    assert most == limit
    assert len(set(answers)) == limit


# -- the property: waves change nothing but time ---------------------------------------------------


class _Executor(FakeExecutor):
    """Fails ADD or DEL per interface name; records which calls succeeded."""

    def __init__(self, add_fails: set[str], del_fails: set[str]) -> None:
        super().__init__()
        self.fails = {("ADD", i) for i in add_fails} | {("DEL", i) for i in del_fails}
        self.done: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        command, ifname = env["CNI_COMMAND"], env.get("CNI_IFNAME", "")
        if (command, ifname) in self.fails:
            raise CniError("DelegateFailed", f"{plugin} {command} {ifname} refused", 11)
        with self.lock:
            out = super().execute(plugin, search_path, env, stdin)
            if command in ("ADD", "DEL"):
                self.done.append((command, ifname))
        return out

    def attached(self) -> set[str]:
        now: dict[str, bool] = {}
        for command, ifname in self.done:
            now[ifname] = command == "ADD"
        return {i for i, on in now.items() if on}


class _Harness(ShimHarness):
    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.published: list[list[dict[str, Any]]] = []

    def services(self, env: Mapping[str, str]) -> Any:
        return super().services(env)._replace(events=self)

    def publish(self, events: Sequence[Mapping[str, Any]]) -> None:
        # What a reader sees; the names and times are the clock's.
        self.published.append([{k: e.get(k) for k in ("type", "reason", "message")} for e in events])

    def settle(self) -> None:
        return None


def _shuffled(rng: random.Random) -> Callable[[Sequence[Callable[[], T]], int], list[T | BaseException]]:
    """A wave's tasks run one at a time in a generated order; answers still at their index."""

    def fanout(tasks: Sequence[Callable[[], T]], limit: int) -> list[T | BaseException]:
        order = list(range(len(tasks)))
        rng.shuffle(order)
        answers: dict[int, T | BaseException] = {}
        for idx in order:
            answers[idx] = run_at_once([tasks[idx]], 1)[0]
        return [answers[i] for i in range(len(tasks))]

    return fanout


def _pod(shim: ShimHarness, kinds: Sequence[str]) -> None:
    """The Pod selects its networks in `kinds` order: 'm' a managed shadow, 'o' an ordinary NAD."""
    selections, entries = [], []
    for i, kind in enumerate(kinds):
        if kind == "m":
            s = managed_shadow(
                namespace=NS, pod_name="pod1", seed=f"s{i}", interface=f"dra{i}", pci=f"0000:03:00.{i + 1}"
            )
            assert shim.kube is not None
            shim.kube.nads[(NS, s["name"])] = s["nad"]
            selections.append(s["selection"])
            entries.append(s["entry"])
        else:
            assert shim.kube is not None
            shim.kube.add_nad(NS, f"net-{i}", {"cniVersion": "1.0.0", "name": f"net-{i}", "type": "macvlan"})
            selections.append({"name": f"net-{i}", "interface": f"net{i}"})
    annotations = {keys.NETWORKS_ANNOTATION: json.dumps(selections)}
    if entries:
        annotations[keys.REGISTRY_ANNOTATION] = registry_annotation(POD_UID, entries)
    assert shim.kube is not None
    shim.kube.add_pod(NS, "pod1", POD_UID, annotations)


def _observe(
    tmp: Path,
    kinds: Sequence[str],
    add_fails: set[str],
    del_fails: set[str],
    conf: Mapping[str, Any],
    fanout: Callable[..., Any] | None,
) -> dict[str, Any]:
    shim = _Harness(tmp)
    shim.executor = executor = _Executor(add_fails, del_fails)
    if fanout is not None:
        shim.fanout = fanout
    _pod(shim, kinds)
    add = shim.run("ADD", shim.conf(**conf), args=ARGS)
    assert shim.kube is not None
    seen: dict[str, Any] = {
        "add": (add.status, add.json),
        "status": [
            w["metadata"]["annotations"][keys.NETWORK_STATUS_ANNOTATION] for w in shim.kube.status_writes
        ],
        "events": shim.published,
        "plan": shim.plan_doc(),
        "results": sorted(p.name for p in (shim.cni_dir / "results").glob("*")),
        "attached after ADD": executor.attached(),
        "log": [line for line in shim.log.lines if line[0] == "error"],
    }
    dele = shim.run("DEL", shim.conf(**conf), args=ARGS)
    seen["del"] = (dele.status, dele.json)
    seen["attached after DEL"] = executor.attached()
    seen["plan after DEL"] = shim.plan_doc()
    return seen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from("mmo"), min_size=1, max_size=7),
    fail_picks=st.sets(st.integers(0, 7), max_size=3),
    del_picks=st.sets(st.integers(0, 7), max_size=2),
    ordinary=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_waves_give_the_serial_orders_outcome(
    kinds: list[str], fail_picks: set[int], del_picks: set[int], ordinary: bool, seed: int
) -> None:
    names = ["eth0", *(f"{'dra' if k == 'm' else 'net'}{i}" for i, k in enumerate(kinds))]
    add_fails = {names[i] for i in fail_picks if i < len(names)}
    del_fails = {names[i] for i in del_picks if i < len(names)}
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        serial = _observe(Path(a), kinds, add_fails, del_fails, {"maxParallelDelegates": 1}, None)
        waved = _observe(
            Path(b),
            kinds,
            add_fails,
            del_fails,
            {"parallelOrdinaryDelegates": ordinary},
            _shuffled(random.Random(seed)),
        )
    # Paths differ between the two runs' directories; nothing else may.
    serial_text = json.dumps(serial, default=sorted).replace(a, "TMP")
    waved_text = json.dumps(waved, default=sorted).replace(b, "TMP")
    if add_fails and del_fails:
        # A wave may have tried a delegate the serial order never reached, and its rollback DEL
        # may fail too (one more logged line, one more delegate kept). The answer is the same,
        # and the cache still names every delegate left attached, for the runtime's DEL.
        assert (waved["add"], waved["status"], waved["events"]) == (
            serial["add"],
            serial["status"],
            serial["events"],
        )
        kept = {d["ifname"] for d in (waved["plan"] or {}).get("delegates", [])}
        assert waved["attached after ADD"] <= kept
        return
    assert waved_text == serial_text


@pytest.mark.parametrize("limit", [1, 2, 8])
def test_the_threaded_fanout_gives_the_same_outcome_as_the_serial_order(limit: int) -> None:
    kinds = ["m"] * 7
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        serial = _observe(Path(a), kinds, {"dra4"}, set(), {"maxParallelDelegates": 1}, None)
        threaded = _observe(Path(b), kinds, {"dra4"}, set(), {"maxParallelDelegates": limit}, run_at_once)
    assert json.dumps(threaded, default=sorted).replace(b, "TMP") == json.dumps(
        serial, default=sorted
    ).replace(a, "TMP")
    assert threaded["add"][0] != 0 and threaded["attached after ADD"] == set()
