"""A rolling upgrade of the installed product, then its rollback, while managed Pods are created
and deleted on both nodes (testbed/soak.py's churn) and a resident Pod runs on each node.

The second version is the same tree built under another tag (``NEXT_TAG``): what a rolling
update puts at risk is the hand-over between two Pods of a DaemonSet on one node (the driver's
sockets and its registration with the kubelet, the checkpoint, the daemon's socket and the
delegate cache), not what changed in the code. Each phase is timed from the helm command until
every node runs the new Pods, registered and serving. What must hold:
- every churn Pod started, with exactly its managed interfaces (``Soak``'s own checks);
- a resident keeps its interfaces, addresses, shadows and checkpoint record across the phase,
  and is deleted cleanly by the other version (DEL from the old version's cache, unprepare from
  the old version's checkpoint);
- the kubelet never restarted a container of the new Pods under the churn (their probes held);
- at the end nothing is left on either node (``Soak``'s end checks, which cover the residents).
"""

from __future__ import annotations

import copy
import functools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed.installation import (
    CHART_DIR,
    NODE_AGENTS,
    RELEASE,
    Installation,
    ProductImage,
)
from testbed.installed import InstalledDriver
from testbed.netlinks import ipv4_addresses
from testbed.observation import Observed, observe
from testbed.results import PASS, Check, check, render_checks
from testbed.scenario import stop_pod
from testbed.soak import Config, PodOutcome, Report, Soak, interface_problems
from testbed.stack import Stack
from testbed.waiting import wait_for

NEXT_TAG = "0.1.0-next"
ROLL_TIMEOUT = 600.0
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    pods_before: int  # churn Pods created when it began
    pods_after: int  # ... and when every node served the new Pods


@dataclass
class UpgradeReport:
    churn: Report
    phases: list[Phase] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)  # the residents', then the probes'

    # Warning Events of the churn's Pods by reason: a retried sandbox or prepare is not a failed
    # start, but it is what a rollout costs a Pod's start, so it is reported.
    warnings: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return self.churn.ok and len(self.phases) == 2 and all(c.status == PASS for c in self.checks)

    @property
    def failed_starts(self) -> int:
        return sum(1 for o in self.churn.outcomes if not o.ran)

    def summary(self) -> str:
        lines = [
            *(
                f"{p.name}: {p.seconds:.1f}s until every node served the new Pods "
                f"(churn Pods {p.pods_before} -> {p.pods_after} meanwhile)"
                for p in self.phases
            ),
            f"Pod starts: {len(self.churn.outcomes)} attempted, {self.failed_starts} failed; warning "
            f"Events: {dict(self.warnings) or 'none'}",
            "residents and probes:",
            render_checks(self.checks),
            self.churn.summary(),
        ]
        return "\n".join(lines)


def image_tag(images: Sequence[ProductImage]) -> str:
    (tag,) = {image.reference.rpartition(":")[2] for image in images}
    return tag


class RollingUpgrade:
    def __init__(
        self, stack: Stack, current: Sequence[ProductImage], upcoming: Sequence[ProductImage],
        say: Callable[[str], None], *, in_flight: int = 4, seed: int = 1,
    ) -> None:  # fmt: skip
        assert stack.installation is not None, "an installed stack (install=helm)"
        self.stack, self.say = stack, say
        self.installation: Installation = stack.installation
        self.current, self.upcoming = current, upcoming
        self.soak = Soak(stack, Config(seed=seed, pods=100_000, in_flight=in_flight, kills=0), say, "upgrade")
        self.report = UpgradeReport(self.soak.report)

    def run(self) -> UpgradeReport:
        for node in self.stack.nodes:
            for image in self.upcoming:
                node.node_runtime.import_image(image.archive)
        self.soak.run(self._disrupt)
        names = {o.name for o in self.report.churn.outcomes}
        events = self.stack.cluster.core.list_namespaced_event(self.soak.workload.namespace).items
        self.report.warnings = Counter(
            str(e.reason) for e in events if e.type == "Warning" and e.involved_object.name in names
        )
        return self.report

    def _disrupt(self) -> None:
        tag = image_tag(self.upcoming)
        residents = self._residents("before")
        self._phase(
            "upgrade",
            self.upcoming,
            lambda: self.installation.helm(
                "upgrade", RELEASE, str(CHART_DIR), "--reuse-values",
                "--set", f"driver.image.tag={tag}", "--set", f"cni.image.tag={tag}",
                "--wait", "--timeout", f"{ROLL_TIMEOUT:.0f}s", timeout=ROLL_TIMEOUT + 60,
            ),
        )  # fmt: skip
        self._kept(residents, "across the upgrade")
        residents = self._residents("between")
        self._no_restarts("under the churn since the upgrade")
        self._phase(
            "rollback",
            self.current,
            lambda: self.installation.helm(
                "rollback",
                RELEASE,
                "1",
                "--wait",
                "--timeout",
                f"{ROLL_TIMEOUT:.0f}s",
                timeout=ROLL_TIMEOUT + 60,
            ),
        )
        self._kept(residents, "across the rollback")
        self._no_restarts("after the rollback")

    def _no_restarts(self, when: str) -> None:
        for node in self.stack.nodes:
            assert node.cni.installed is not None and isinstance(node.driver, InstalledDriver)
            restarts = (node.driver.pod.restarts(), node.cni.installed.pod.restarts())
            self.report.checks.append(
                check(
                    f"{node.node_name}: the kubelet restarted neither the driver nor the daemon {when}",
                    restarts == (0, 0),
                    f"restarts (driver, daemon): {restarts}",
                )
            )

    # -- residents: one Pod per node that lives through a phase --------------------------------------

    def _residents(self, label: str) -> list[tuple[Stack, dict[str, Any], Observed, dict[str, Any]]]:
        made = []
        for node in self.stack.nodes:
            pod = copy.deepcopy(self.soak.workload.pod)
            pod["metadata"]["name"] = f"upgrade-{label}-{node.node_name}"
            pod["spec"]["nodeSelector"] = {**pod["spec"]["nodeSelector"], HOSTNAME_LABEL: node.node_name}
            outcome = PodOutcome(pod["metadata"]["name"], node.node_name)
            with self.soak.lock:
                self.soak.report.outcomes.append(outcome)
            self.stack.cluster.create_pod(pod)
            live = self.stack.cluster.wait_running(pod["metadata"]["namespace"], pod["metadata"]["name"])
            outcome.ran = True
            obs = observe(self.stack, live)
            claim_uid = str(obs.claim["metadata"]["uid"])
            made.append((node, pod, obs, node.driver.checkpoint_claims().get(claim_uid, {})))
        return made

    def _kept(
        self, residents: Sequence[tuple[Stack, dict[str, Any], Observed, dict[str, Any]]], when: str
    ) -> None:
        """Each resident as it was before the phase; then deleted by the version now running."""
        for node, pod, before, record in residents:
            name = pod["metadata"]["name"]
            after = observe(self.stack, self.stack.cluster.wait_running(pod["metadata"]["namespace"], name))
            problems = interface_problems(node, after)
            # IPv4 and MAC: an IPv6 link-local address loses its "tentative" flag meanwhile.
            addresses = {n: (ipv4_addresses(link), link.get("address")) for n, link in after.links.items()}
            was = {n: (ipv4_addresses(link), link.get("address")) for n, link in before.links.items()}
            checks = [
                check(f"{name} kept its interfaces {when}", not problems, "; ".join(problems)),
                check(f"{name} kept its addresses {when}", addresses == was, f"{was} -> {addresses}"),
                check(
                    f"{name} kept its shadows {when}",
                    sorted(s["metadata"]["name"] for s in after.shadows)
                    == sorted(s["metadata"]["name"] for s in before.shadows),
                ),
                check(
                    f"{name}'s checkpoint record carried over {when}",
                    bool(record)
                    and node.driver.checkpoint_claims().get(str(after.claim["metadata"]["uid"])) == record,
                ),
            ]
            self.report.checks += checks
            stop_pod(self.stack, pod)

    # -- a phase: helm, then every node on the new Pods ------------------------------------------------

    def _phase(self, name: str, images: Sequence[ProductImage], command: Callable[[], str]) -> None:
        refs = {image.reference for image in images}
        pods_before, started = self.soak.created, time.monotonic()
        self.say(f"{name}: helm, then every node on {', '.join(sorted(refs))}")
        command()
        for node in self.stack.nodes:
            wait_for(
                functools.partial(self._runs, node.node_name, refs),
                ROLL_TIMEOUT,
                what=f"{node.node_name} to run {sorted(refs)}, Ready",
                interval=1.0,
            )
            node.driver.wait_registered()
            node.cni.start_daemon()
        self.report.phases.append(Phase(name, time.monotonic() - started, pods_before, self.soak.created))

    def _runs(self, node: str, refs: set[str]) -> bool:
        for namespace, daemonset in NODE_AGENTS:
            pod = self.installation.ready_pod(namespace, daemonset, node)
            if pod is None or {c["image"] for c in pod["spec"]["containers"]} - refs:
                return False
        return True
