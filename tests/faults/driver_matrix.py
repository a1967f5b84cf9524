"""The driver fault matrix: every side-effect boundary of prepare, repair and unprepare crossed
with every fault that can happen there, each cell judged on the end state after recovery.

A cell is one workload (claim + Pod, allocated by the real scheduler): the fault is armed, the
kubelet call that crosses the boundary is made, the fault is disarmed and recovery runs the way
production recovers (kubelet retries the same call; after a kill the driver restarts, its repair
worker runs first, then kubelet retries). The cell passes only when the fault really fired and the
state then matches the expected one: after prepare exactly one protected shadow whose UID the
checkpoint records as Ready and the Pod selects; after unprepare no record, no shadow, no managed
selection or registry on the Pod, every VF on its original driver and no CDI spec.

API faults are injected on the wire by the fault proxy in front of the real apiserver. Local
boundaries (checkpoint writes, host/CDI cleanup) fail with EROFS on a read-only bind mount of
their directory, made read-only while the proxy delays the API request just before the write,
and are killed at the driver's named crash points; API boundaries are killed with SIGKILL while
the proxy holds their request, except the shadow Create, killed at its crash point just after it.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sriov_contract.keys import PROTECTION_FINALIZER
from sriov_dra.prepare.crashpoints import CRASH_ENV
from testbed import faultproxy, faults
from testbed.claims import allocated_claim
from testbed.managed_driver import NADS, pod_networks, release_workloads, shadows
from testbed.waiting import wait_for

PREPARE = "prepare"
UNPREPARE = "unprepare"
KILL = "kill+restart"
LOST = "lost response"
WRITE_ERROR = "EROFS"
COLUMNS = ("Forbidden", "NotFound", "timeout", "409", "422", LOST, WRITE_ERROR, KILL)
CHECKPOINT_DIR = "checkpoint"
CDI_DIR = "cdi"
# How long the request just before a local write is delayed, while the test makes the write's
# directory read-only.
ARM_DELAY_S = 1.5
# How long the proxy holds a "timeout" request unanswered: past the driver's own request timeout
# (sriov_dra.kube.transport.REQUEST_TIMEOUT_S) and past kubelet's 45 s call deadline, so a driver that waited
# for the answer would leave kubelet with nothing but a deadline error.
TIMEOUT_HOLD_S = 60.0
# Long enough to SIGKILL the driver while its request is held.
KILL_HOLD_S = 30.0
# urllib3 silently retries GET and DELETE after a dropped connection (three retries), so a lost
# response on those verbs must fire four times before the driver sees it. A timeout fires once:
# four would outlast kubelet's deadline by the client's own retries alone.
IDEMPOTENT_ATTEMPTS = 4


def _fault(column: str) -> faults.Fault:
    return {
        "Forbidden": faults.forbidden(),
        "NotFound": faults.not_found(),
        "timeout": faults.timeout(TIMEOUT_HOLD_S),
        "409": faults.conflict(),
        "422": faults.invalid(),
        LOST: faults.response_lost(),
    }[column]


@dataclass(frozen=True)
class Boundary:
    name: str
    stage: str
    """The kubelet call that crosses it: PREPARE or UNPREPARE."""
    request: dict[str, Any] = field(default_factory=dict)
    """The proxy filter of its API request; empty for a local (file/host) boundary."""
    crash_point: str = ""
    """The driver's named crash point for a local boundary's kill cell."""
    local_dir: str = ""
    """The directory a local boundary writes (CHECKPOINT_DIR or CDI_DIR), made read-only for EROFS."""
    armed_by: dict[str, Any] = field(default_factory=dict)
    """The API request just before the local write, after which the directory goes read-only;
    empty: read-only before the kubelet call."""
    not_applicable: frozenset[str] = frozenset()

    def applies(self, column: str) -> bool:
        if column in self.not_applicable:
            return False
        if column == WRITE_ERROR:
            return bool(self.local_dir)
        return column == KILL or bool(self.request)


_READ_ONLY = frozenset({"409", "422"})  # a GET answers neither

# The API requests that several boundaries fault, or that arm a local write after them.
SHADOW_CREATE = {"verb": "create", "resource": NADS}
POD_PATCH = {"verb": "patch", "resource": "pods"}
SHADOW_PATCH = {"verb": "patch", "resource": NADS}


def _local_write(
    name: str, stage: str, crash_point: str, local_dir: str, armed_by: dict[str, Any] | None = None
) -> Boundary:
    return Boundary(name, stage, crash_point=crash_point, local_dir=local_dir, armed_by=armed_by or {})


BOUNDARIES = (
    _local_write("checkpoint write (Pending)", PREPARE, "prepare-pending", CHECKPOINT_DIR),
    Boundary(
        "source NAD read",
        PREPARE,
        {"verb": "get", "resource": NADS, "name": "rail-a-net"},
        not_applicable=_READ_ONLY,
    ),
    # Its kill cell dies once the Create is applied, before the UID reaches the checkpoint.
    Boundary("shadow Create", PREPARE, SHADOW_CREATE, crash_point="prepare-created"),
    _local_write("UID persist", PREPARE, "prepare-shadow", CHECKPOINT_DIR, SHADOW_CREATE),
    Boundary("Pod patch (selections)", PREPARE, POD_PATCH),
    _local_write("Ready write", PREPARE, "prepare-pod", CHECKPOINT_DIR, POD_PATCH),
    _local_write("checkpoint write (Deleting)", UNPREPARE, "unprepare-deleting", CHECKPOINT_DIR),
    # A DELETE is never answered 422: its only body is DeleteOptions with a UID precondition.
    Boundary(
        "shadow Delete", UNPREPARE, {"verb": "delete", "resource": NADS}, not_applicable=frozenset({"422"})
    ),
    Boundary("selection removal", UNPREPARE, POD_PATCH),
    _local_write("host/CDI cleanup", UNPREPARE, "unprepare-withdrawn", CDI_DIR, POD_PATCH),
    _local_write("ReleaseComplete write", UNPREPARE, "unprepare-hardware", CHECKPOINT_DIR, POD_PATCH),
    Boundary("finalizer patch", UNPREPARE, SHADOW_PATCH),
    _local_write("checkpoint delete", UNPREPARE, "unprepare-finalized", CHECKPOINT_DIR, SHADOW_PATCH),
)
ROWS = tuple(b.name for b in BOUNDARIES)

# What plain `make test` runs: one cell of each kind of fault and recovery.
FAST = frozenset(
    {
        ("shadow Create", LOST),
        ("Pod patch (selections)", "Forbidden"),
        ("finalizer patch", "422"),
        ("finalizer patch", "NotFound"),
        ("checkpoint write (Pending)", KILL),
        ("ReleaseComplete write", KILL),
    }
)


class CellFailed(AssertionError):
    pass


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """`directory` on a read-only bind mount of itself: every write under it fails with EROFS."""
    subprocess.run(["mount", "--bind", str(directory), str(directory)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(directory)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(directory)], check=True)


class DriverMatrix:
    """Runs cells against one managed driver behind one fault proxy, restarting it only for kills."""

    def __init__(
        self, testbed: Any, agent: Any, proxy: faultproxy.FaultProxy, namespace: str, cls: str
    ) -> None:
        self.testbed = testbed
        self.agent = agent
        self.proxy = proxy
        self.ns = namespace
        self.cls = cls
        self.drivers = self._vf_drivers()
        self._count = 0

    # -- one cell ------------------------------------------------------------------------------

    def run(self, boundary: Boundary, column: str) -> str:
        """Run one cell; returns "" on PASS, else what went wrong."""
        self._count += 1
        claim = allocated_claim(self.testbed, self.ns, self.cls, f"c{self._count}")
        try:
            if boundary.stage == UNPREPARE:
                self._expect_ok(self._prepare, claim, "the prepare before the unprepare fault")
                self._check_prepared(claim)
            call = self._prepare if boundary.stage == PREPARE else self._unprepare
            if column == KILL:
                self._kill_at(boundary, call, claim)
                self._await_repair(boundary, claim)
            elif column == WRITE_ERROR:
                self._read_only_at(boundary, call, claim)
            else:
                self._fault_at(boundary, column, call, claim)
            if boundary.stage == PREPARE:
                self._retry_until_ok(self._prepare, claim)
                self._check_prepared(claim)
            self._retry_until_ok(self._unprepare, claim)
            self._check_released(claim)
            return ""
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"[:400]
        finally:
            self.proxy.clear()
            self.agent.env.pop(CRASH_ENV, None)
            if self.agent.proc is None or self.agent.proc.poll() is not None:
                self._start()
            release_workloads(self.testbed, self.ns)

    def _fault_at(self, boundary: Boundary, column: str, call: Callable[[Any], str], claim: Any) -> None:
        idempotent = boundary.request["verb"] in ("get", "delete")
        times = IDEMPOTENT_ATTEMPTS if column == LOST and idempotent else 1
        rule = self.proxy.add_rule(_fault(column), namespace=self.ns, times=times, **boundary.request)
        first = call(claim)
        if not rule.fired:
            raise CellFailed(f"the fault never fired (the call answered {first!r})")
        if first.startswith("rpc:"):
            raise CellFailed(f"kubelet got no answer within its deadline: {first}")
        self.proxy.remove_rule(rule)
        # A prepare refused at the source read is refused before any VF is touched.
        touched = claim["metadata"]["uid"] in self.agent.records() or shadows(self.testbed, self.ns)
        if boundary.name == "source NAD read" and first and touched:
            raise CellFailed(f"a refused prepare ({first}) left a record or a shadow behind")

    def _read_only_at(self, boundary: Boundary, call: Callable[[Any], str], claim: Any) -> None:
        directory = (
            self.agent.checkpoint.parent if boundary.local_dir == CHECKPOINT_DIR else self.agent.dirs.cdi
        )
        answers: list[str] = []
        with contextlib.ExitStack() as stack:
            if not boundary.armed_by:
                stack.enter_context(read_only(directory))
                answers.append(call(claim))
            else:
                rule = self.proxy.add_rule(
                    faults.delay(ARM_DELAY_S), namespace=self.ns, times=1, **boundary.armed_by
                )
                caller = threading.Thread(target=lambda: answers.append(call(claim)), daemon=True)
                caller.start()
                wait_for(lambda: rule.fired, 30, what=f"the request before the {boundary.name}")
                stack.enter_context(read_only(directory))
                caller.join(60)
        (answer,) = answers
        # The write failed: kubelet must get a reasoned error, never a crashed call.
        if not answer or answer.startswith("rpc:"):
            raise CellFailed(f"the call with a read-only {boundary.local_dir} directory answered {answer!r}")

    def _kill_at(self, boundary: Boundary, call: Callable[[Any], str], claim: Any) -> None:
        if boundary.crash_point:
            self.agent.stop()
            self.agent.env[CRASH_ENV] = boundary.crash_point
            self._start()
            answer = call(claim)
            if self.agent.proc.wait(10) != 137:
                raise CellFailed(f"the driver did not die at {boundary.crash_point} (answered {answer!r})")
            self.agent.env.pop(CRASH_ENV)
        else:
            rule = self.proxy.add_rule(
                faults.timeout(KILL_HOLD_S), namespace=self.ns, times=1, **boundary.request
            )
            caller = threading.Thread(target=call, args=(claim,), daemon=True)
            caller.start()
            wait_for(lambda: rule.fired, 30, what=f"the {boundary.name} request to be held")
            self.agent.proc.kill()
            self.agent.proc.wait()
            caller.join(30)
            self.proxy.remove_rule(rule)
        self.agent.proc = None
        self._start()

    def _await_repair(self, boundary: Boundary, claim: Any) -> None:
        """After a kill the restarted driver's repair worker, not kubelet, finishes the job: a
        prepare recorded before the kill becomes Ready, a release in progress completes."""
        uid = claim["metadata"]["uid"]

        def converged() -> bool:
            record = self.agent.records().get(uid)
            if boundary.stage == UNPREPARE:
                return record is None
            return record is None or {d["managedBinding"]["phase"] for d in record["devices"]} == {"Ready"}

        wait_for(converged, 30, what=f"the repair worker to converge claim {uid} after the kill")

    def _start(self) -> None:
        """Start the driver and register it with a fresh fake kubelet.

        A killed driver leaves its sockets behind; they are removed first so that registration
        dials the new process, never the dead one's file.
        """
        for sock in [*self.agent.dirs.registry.glob("*.sock"), *self.agent.dirs.plugins.rglob("*.sock")]:
            sock.unlink()
        self.agent.start()
        self.agent.kubelet = self.agent.factory(self.agent.dirs.registry, timeout=30)
        self.agent.kubelet.register()

    # -- kubelet calls -------------------------------------------------------------------------

    def _prepare(self, claim: Any) -> str:
        try:
            return str(self.agent.prepare(claim).error)
        except Exception as exc:  # the gRPC call itself failed: the driver died or timed out
            return f"rpc: {type(exc).__name__}"

    def _unprepare(self, claim: Any) -> str:
        try:
            return str(self.agent.unprepare(claim))
        except Exception as exc:
            return f"rpc: {type(exc).__name__}"

    def _expect_ok(self, call: Callable[[Any], str], claim: Any, what: str) -> None:
        answer = call(claim)
        if answer:
            raise CellFailed(f"{what} failed: {answer}")

    def _retry_until_ok(self, call: Callable[[Any], str], claim: Any) -> None:
        """kubelet's retry: the same call until it succeeds, a bounded number of times."""
        answers = []
        for _ in range(5):
            answers.append(call(claim))
            if not answers[-1]:
                return
        raise CellFailed(f"kubelet's retries kept failing: {answers}")

    # -- expected states -----------------------------------------------------------------------

    def _check_prepared(self, claim: Any) -> None:
        uid = claim["metadata"]["uid"]
        pod = f"pod-{claim['metadata']['name']}"
        record = self.agent.records().get(uid)
        if record is None:
            raise CellFailed("no checkpoint record after a successful prepare")
        bindings = [d["managedBinding"] for d in record["devices"]]
        found = shadows(self.testbed, self.ns)
        if len(found) != 1:
            raise CellFailed(f"{len(found)} shadows after prepare, expected exactly one")
        (shadow,) = found
        md = shadow["metadata"]
        if [(b["phase"], b["shadowUID"]) for b in bindings] != [("Ready", md["uid"])]:
            raise CellFailed(
                f"checkpoint {[(b['phase'], b['shadowUID']) for b in bindings]} != Ready {md['uid']}"
            )
        if md.get("finalizers") != [PROTECTION_FINALIZER] or md.get("deletionTimestamp"):
            raise CellFailed(
                f"shadow not protected and live: {md.get('finalizers')} {md.get('deletionTimestamp')}"
            )
        nets, registry = pod_networks(self.testbed, self.ns, pod)
        if nets != [{"name": md["name"], "namespace": self.ns, "interface": "dra0"}]:
            raise CellFailed(f"Pod selections {nets}")
        if registry is None or [(e.uid, e.claim_uid) for e in registry.entries] != [(md["uid"], uid)]:
            raise CellFailed(f"Pod registry {registry}")

    def _check_released(self, claim: Any) -> None:
        uid = claim["metadata"]["uid"]
        pod = f"pod-{claim['metadata']['name']}"
        if uid in self.agent.records():
            raise CellFailed(f"claim still checkpointed after unprepare: {self.agent.records()[uid]}")
        wait_for(lambda: shadows(self.testbed, self.ns) == [], 20, what="every shadow to be gone")
        if pod_networks(self.testbed, self.ns, pod) != ([], None):
            raise CellFailed(f"Pod keeps managed selections: {pod_networks(self.testbed, self.ns, pod)}")
        if self._vf_drivers() != self.drivers:
            raise CellFailed("a VF is not back on its original driver")
        left = [p.name for p in self.agent.dirs.cdi.iterdir() if uid in p.name]
        if left:
            raise CellFailed(f"CDI specs left: {left}")

    def _vf_drivers(self) -> dict[str, str | None]:
        node = self.agent.fake_node
        return {vf.pci: node.driver_of(vf.pci) for vf in node.vfs}
