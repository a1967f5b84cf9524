"""`make soak`: managed Pods created and deleted on two real nodes while a seeded schedule kills
the driver, cni-shim-daemon and the kubelet at random moments (testbed/stack.py, second_node),
and, as many as asked for, reboots a node (testbed/reboot.py), flaps a PF's link, restarts the API
server and deletes a node's CNI delegate cache.

Bounded in count and in time, it stops by itself. Each Pod gets one VF on each rail; every Pod
that reached Running must have exactly its managed interfaces; at the end nothing may be left:
shadows (and so their finalizers), whereabouts and host-local leases, CDI specs, checkpoint
records, orphans, and every VF is back on the host. The seed names the schedule (which components
die, on which node, after how many Pods and how long after); the moments it lands on are the
machine's, so a failure prints the seed that reproduces the schedule.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kubernetes.client.exceptions import ApiException

from sriov_contract import keys
from sriov_contract.errors import ReasonedError
from testbed import controlplane, node_events, reboot
from testbed.checks import check_addresses, check_interfaces, check_shadows, teardown_checks
from testbed.cluster import NAD_API
from testbed.netlinks import ipv4_addresses
from testbed.observation import Observed, observe
from testbed.results import PASS, Check, check, render_checks
from testbed.scenario import applied, stop_pod
from testbed.stack import Stack
from testbed.workloads import Workload, rails_workload

KINDS = ("driver", "daemon", "kubelet")
# The node's bad days beyond the kills (issue #35): drawn from their own random stream, so a seed
# names the same kills whether or not these are asked for.
REBOOT, LINK_FLAP, APISERVER, CACHE = "reboot", "linkflap", "apiserver", "cachedel"
EVENTS = (REBOOT, LINK_FLAP, APISERVER, CACHE)
LINK_DOWN_S = 3.0  # how long a flapped PF stays down
MANAGED_INTERFACES = ("dra0", "dra1")  # one VF per rail (rails_workload)
CLUSTER_INTERFACES = ("lo", "eth0")
RUNNING_TIMEOUT = 240.0  # generous: a kubelet restart and the retries after it sit in between
# How much of a Pod's problem the report keeps: enough for the kubelet's lines after the conditions.
PROBLEM_CHARS = 3000


@dataclass(frozen=True)
class Kill:
    after_pods: int  # fired once this many Pods were created ...
    delay_s: float  # ... and this long after that
    kind: str
    node: int  # index into Stack.nodes


@dataclass(frozen=True)
class Config:
    seed: int
    pods: int = 200
    in_flight: int = 8
    kills: int = 15
    time_limit_s: float = 900.0
    reboots: int = 0
    link_flaps: int = 0
    apiserver_restarts: int = 0
    cache_deletions: int = 0

    def events(self) -> dict[str, int]:
        return {
            REBOOT: self.reboots,
            LINK_FLAP: self.link_flaps,
            APISERVER: self.apiserver_restarts,
            CACHE: self.cache_deletions,
        }


def schedule(config: Config) -> list[Kill]:
    """The seeded schedule: ``config.kills`` kills spread over the run (none in the last tenth, so
    the end checks see a settled node), every kind about equally often, on either node; then the
    other events asked for, from a second stream of the same seed (the kills stay what they were)."""
    rng = random.Random(config.seed)
    kinds = [KINDS[i % len(KINDS)] for i in range(config.kills)]
    rng.shuffle(kinds)
    last = max(1, config.pods - config.pods // 10)
    at = sorted(rng.randrange(1, last + 1) for _ in kinds)
    kills = [
        Kill(a, round(rng.uniform(0.0, 4.0), 2), k, rng.randrange(2)) for a, k in zip(at, kinds, strict=True)
    ]
    more = random.Random(f"{config.seed}:events")
    events = [
        Kill(more.randrange(1, last + 1), round(more.uniform(0.0, 4.0), 2), kind, more.randrange(2))
        for kind, count in config.events().items()
        for _ in range(count)
    ]
    return sorted(kills + events, key=lambda k: k.after_pods)  # stable: kills first on a tie


@dataclass
class PodOutcome:
    name: str
    node: str = ""
    ran: bool = False
    problems: list[str] = field(default_factory=list)


@dataclass
class Report:
    config: Config
    kills: list[str] = field(default_factory=list)
    kills_by_kind: Counter[str] = field(default_factory=Counter)
    serving_again_s: dict[str, list[float]] = field(default_factory=dict)  # kind -> each one's
    outcomes: list[PodOutcome] = field(default_factory=list)
    end_checks: list[Check] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    churn_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and all(c.status == PASS for c in self.end_checks)

    def summary(self) -> str:
        ran = [o for o in self.outcomes if o.ran]
        per_node = Counter(o.node for o in ran)
        kinds = ", ".join(f"{k} {self.kills_by_kind[k]}" for k in KINDS)
        events = ", ".join(f"{k} {self.kills_by_kind[k]}" for k in EVENTS)
        lines = [
            f"seed {self.config.seed}: {len(self.outcomes)} Pods created and deleted, {len(ran)} reached "
            f"Running ({', '.join(f'{n} on {node}' for node, n in sorted(per_node.items()))}), "
            f"{self.config.in_flight} in flight",
            f"kills: {sum(self.kills_by_kind[k] for k in KINDS)} ({kinds}); "
            f"events: {sum(self.kills_by_kind[k] for k in EVENTS)} ({events}); churn {self.churn_s:.0f}s",
            *(
                f"  {kind}: {len(times)}, serving again in {min(times):.1f}-{max(times):.1f}s"
                for kind, times in sorted(self.serving_again_s.items())
            ),
            "end checks:",
            render_checks(self.end_checks),
        ]
        if self.failures:
            lines += ["failures:", *(f"  {f}" for f in self.failures[:40])]
        verdict = (
            "PASS"
            if self.ok
            else f"FAIL -- reproduce the schedule with SOAK_SEED={self.config.seed} make soak"
        )
        return "\n".join([*lines, f"SOAK {verdict}"])


def interface_problems(stack: Stack, obs: Observed) -> list[str]:
    """What differs from "exactly its managed interfaces": dra0 and dra1 (plus lo and the cluster
    network's eth0), each with one address in its own rail's subnet, from two shadows of this Pod."""
    problems = []
    extra = sorted(set(obs.links) - set(MANAGED_INTERFACES) - set(CLUSTER_INTERFACES))
    missing = sorted(set(MANAGED_INTERFACES) - set(obs.links))
    if extra or missing:
        problems.append(f"interfaces {sorted(obs.links)}: extra {extra}, missing {missing}")
    for verdict in (check_shadows(obs, 2), check_interfaces(obs), check_addresses(stack, obs)):
        if verdict.status != PASS:
            problems.append(f"{verdict.name}: {verdict.detail}")
    for name in MANAGED_INTERFACES:
        if len(ipv4_addresses(obs.links.get(name, {}))) != 1:
            problems.append(f"{name}: addresses {ipv4_addresses(obs.links.get(name, {}))}")
    return problems


class Gate:
    """The soak's own API steps against an API server restart: the restart waits until the steps
    in flight are done and no new one starts until it is over. Only the soak's client pauses (a
    user's kubectl would fail meanwhile); the kubelets, drivers, daemons and controllers live
    through the outage with their work in flight."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._closed)
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def closed(self) -> Iterator[None]:
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: self._active == 0)
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


class Soak:
    """Churn: ``config.in_flight`` workers create, check and delete rails Pods on both nodes, while
    the main thread disrupts them: the seeded kill schedule, or what ``run`` is given (an upgrade,
    testbed/upgrade.py)."""

    def __init__(self, stack: Stack, config: Config, say: Callable[[str], None], name: str = "soak") -> None:
        if len(stack.nodes) != 2:
            raise ReasonedError("SoakNeedsTwoNodes", "the soak runs on a Stack with second_node=True")
        self.stack = stack
        self.config = config
        self.say = say
        self.name = name
        self.workload = rails_workload(stack, name)
        self.report = Report(config)
        self.lock = threading.Lock()
        self.created = 0
        self.started = 0.0
        self.stop = threading.Event()
        self.gate = Gate()
        # Per node: how many reboots began, and whether it serves (not in the middle of one).
        self.reboots: Counter[str] = Counter()
        self.serving = {node.node_name: threading.Event() for node in stack.nodes}
        for event in self.serving.values():
            event.set()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def run(self, disrupt: Callable[[], None] | None = None) -> Report:
        """Churn until ``config.pods`` Pods were created, or, with ``disrupt``, until it returned."""
        # Eight workers share one client; urllib3 says each time its pool of 4 overflows.
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        kills = schedule(self.config) if disrupt is None else []
        self.say(f"{self.name}: seed {self.config.seed}, {self.config.in_flight} Pods in flight")
        if kills:
            self.say(
                f"{self.name}: kill schedule: "
                + ", ".join(f"{k.kind}@node{k.node} after {k.after_pods} Pods+{k.delay_s}s" for k in kills)
            )
        with applied(self.stack, self.workload):
            self.started = time.monotonic()
            # Daemon threads: an interrupted soak must not wait for their Pods before tearing down.
            workers = [
                threading.Thread(target=self._worker, name=f"soak-{i}", daemon=True)
                for i in range(self.config.in_flight)
            ]
            for thread in workers:
                thread.start()
            threading.Thread(target=self._stop_after, args=(workers,), daemon=True).start()
            # The kills run on the main thread: a process started with PR_SET_PDEATHSIG dies with the
            # *thread* that started it, so a restarted kubelet or daemon would die with a killer thread.
            if disrupt is None:
                self._killer(kills)
            else:
                try:
                    disrupt()
                finally:
                    self.finish()
            self.stop.wait()
            self.report.churn_s = self.elapsed()
            self.report.end_checks = self._end_checks()
        return self.report

    # -- churn ------------------------------------------------------------------------------------

    def finish(self) -> None:
        """No new Pod from now on; the ones in flight complete."""
        with self.lock:
            self.created = max(self.created, self.config.pods)

    def _next(self) -> int | None:
        with self.lock:
            if self.created >= self.config.pods:
                return None
            if self.elapsed() > self.config.time_limit_s:
                self.report.failures.append(
                    f"time limit {self.config.time_limit_s:.0f}s reached after {self.created} Pods"
                )
                self.created = self.config.pods  # every worker stops
                return None
            self.created += 1
            return self.created

    def _worker(self) -> None:
        while (index := self._next()) is not None:
            outcome = PodOutcome(f"{self.name}-{self.config.seed}-{index:03d}")
            with self.lock:
                self.report.outcomes.append(outcome)
            try:
                self._one_pod(outcome)
            except Exception as exc:  # recorded against the Pod; the soak goes on
                outcome.problems.append(f"{type(exc).__name__}: {str(exc)[:PROBLEM_CHARS]}")
            if outcome.problems:
                with self.lock:
                    self.report.failures += [
                        f"{outcome.name} ({outcome.node}): {p}" for p in outcome.problems
                    ]

    def _one_pod(self, outcome: PodOutcome) -> None:
        pod = copy.deepcopy(self.workload.pod)
        pod["metadata"]["name"] = outcome.name
        namespace = pod["metadata"]["namespace"]
        with self.gate.step():
            self.stack.cluster.create_pod(pod)
        try:
            for attempt in range(3):
                with self.gate.step():
                    live = self.stack.cluster.wait_running(namespace, outcome.name, RUNNING_TIMEOUT)
                outcome.node = str(live["spec"]["nodeName"])
                outcome.ran = True
                # A node that reboots under the check restarts the Pod in a new sandbox: checked
                # again once the node is back (the same interfaces are owed after a reboot).
                self.serving[outcome.node].wait()
                generation = self.reboots[outcome.node]
                try:
                    with self.gate.step():
                        problems = interface_problems(self.stack.on(outcome.node), observe(self.stack, live))
                except (ReasonedError, OSError, ValueError, KeyError) as exc:
                    problems = [f"{type(exc).__name__}: {str(exc)[:PROBLEM_CHARS]}"]
                if not problems or self.reboots[outcome.node] == generation or attempt == 2:
                    outcome.problems += problems
                    break
        except ReasonedError as exc:
            outcome.problems.append(f"{exc.reason}: {exc.message[:PROBLEM_CHARS]}")
        finally:
            # Deleted as a user would; a deletion that does not complete is this Pod's failure too.
            with self.gate.step():
                stop_pod(self.stack, pod)

    def _stop_after(self, workers: Sequence[threading.Thread]) -> None:
        for thread in workers:
            thread.join()
        self.stop.set()

    def _killer(self, kills: Sequence[Kill]) -> None:
        for kill in kills:
            while not self.stop.is_set() and self.created < kill.after_pods:
                self.stop.wait(0.1)
            if self.stop.is_set():
                return
            self.stop.wait(kill.delay_s)
            node = self.stack.nodes[kill.node]
            at, pods = self.elapsed(), self.created
            try:
                what = self._disrupt(kill, node)
            except Exception as exc:  # the node (or the bed) did not come back: the soak ends here
                self.report.failures.append(f"{kill.kind} on {node.node_name} did not come back: {exc}")
                self.say(f"soak: {self.report.failures[-1]}")
                self.finish()
                return
            took = self.elapsed() - at
            line = (
                f"t={at:6.1f}s {'kill ' if kill.kind in KINDS else ''}{kill.kind:<9} {what} "
                f"(after {pods} Pods), serving again in {took:.1f}s"
            )
            self.say(f"soak: {line}")
            with self.lock:
                self.report.kills.append(line)
                self.report.kills_by_kind[kill.kind] += 1
                self.report.serving_again_s.setdefault(kill.kind, []).append(took)

    def _disrupt(self, kill: Kill, node: Stack) -> str:
        """One event of the schedule, on ``node`` where it is a node's; returns what it hit."""
        if kill.kind == APISERVER:
            with self.gate.closed():
                controlplane.stop_apiserver(self.stack.bed)
                controlplane.start_apiserver(self.stack.bed)
            return "of the bed"
        if kill.kind == REBOOT:
            self.serving[node.node_name].clear()
            self.reboots[node.node_name] += 1
            try:
                reboot.reboot(node)
            finally:
                self.serving[node.node_name].set()
        elif kill.kind == LINK_FLAP:
            pf = node_events.flap_link(node, self.report.kills_by_kind[LINK_FLAP], LINK_DOWN_S)
            return f"{pf} on {node.node_name}"
        elif kill.kind == CACHE:
            return f"on {node.node_name} ({node_events.delete_cni_cache(node)} entries)"
        else:
            node.kill(kill.kind)
        return f"on {node.node_name}"

    # -- the end ----------------------------------------------------------------------------------

    def _end_checks(self) -> list[Check]:
        return end_checks(
            self.stack, self.workload, [f"{self.workload.namespace}/{o.name}" for o in self.report.outcomes]
        )


def end_checks(stack: Stack, workload: Workload, refs: Sequence[str]) -> list[Check]:
    """Nothing of these Pods (namespace/name) is left on either node, nor in the API."""
    checks = []
    for node in stack.nodes:
        checks += [
            Check(f"{node.node_name}: {c.name}", c.status, c.detail)
            for c in [*teardown_checks(node, workload, refs), cdi_check(node), orphan_check(node)]
        ]
    checks.append(finalizer_check(stack, workload.namespace))
    return checks


def cdi_check(node: Stack) -> Check:
    left = sorted(p.name for p in (node.run / "cdi").glob("*.json"))
    return check("no CDI spec is left", not left, ", ".join(left))


def orphan_check(node: Stack) -> Check:
    doc = node.driver.orphan_scan()
    return check(
        "the orphan scan finds no orphan and no shadow",
        not doc["orphans"] and not doc["shadows"],
        json.dumps({"orphans": doc["orphans"], "shadows": len(doc["shadows"])}),
    )


def finalizer_check(stack: Stack, namespace: str) -> Check:
    """No NAD in the namespace still carries our protection finalizer (a shadow that lost its
    binding annotation would hide from Cluster.shadows)."""
    try:
        nads = stack.cluster.list_objects(*NAD_API, namespace=namespace)
    except ApiException as exc:
        return check("no NAD carries the protection finalizer", False, f"listing failed: {exc.status}")
    held = [
        n["metadata"]["name"]
        for n in nads
        if keys.PROTECTION_FINALIZER in (n["metadata"].get("finalizers") or [])
    ]
    return check("no NAD carries the protection finalizer", not held, ", ".join(held))


def seed_from(value: str | None) -> int:
    """``SOAK_SEED`` if given, else a fresh one (printed, so any run can be repeated)."""
    return int(value) if value else random.SystemRandom().randrange(1, 2**31)
