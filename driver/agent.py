"""The node agent's long-running orchestration: policy reconciliation and slice publication.

One worker thread reconciles whenever anything relevant changed (policies, DeviceAttributes, the
Node's labels, our ResourceSlices); triggers coalesce, so a burst of events costs one reconcile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from driver.checkpoint import PreparedClaims
from driver.inventory import DeviceState
from driver.policy import evaluate
from driver.prepare import Preparer
from driver.slices import SlicePublisher

if TYPE_CHECKING:
    from kubernetes import client

    from driver.events import PhaseObserver
    from driver.managed import ManagedPreparer
    from driver.metrics import DriverMetrics
    from driver.repair import RepairWorker

log = logging.getLogger(__name__)


class PolicySource(Protocol):
    node_name: str

    def policies(self) -> list[dict[str, Any]]: ...

    def device_attributes(self) -> list[dict[str, Any]]: ...

    def node(self) -> tuple[str, dict[str, str]]: ...


class PolicyController:
    """Evaluates policies against the inventory and republishes slices when needed."""

    def __init__(
        self,
        source: PolicySource,
        state: DeviceState,
        publisher: SlicePublisher,
        *,
        managed: bool,
    ) -> None:
        self._source = source
        self._state = state
        self._publisher = publisher
        self._managed = managed
        self._trigger = threading.Event()

    def trigger(self) -> None:
        self._trigger.set()

    def reconcile(self) -> None:
        _uid, labels = self._source.node()
        outcome = evaluate(
            policies=self._source.policies(),
            device_attributes=self._source.device_attributes(),
            node_name=self._source.node_name,
            node_labels=labels,
            inventory=self._state.inventory(),
            managed=self._managed,
        )
        for warning in outcome.warnings:
            log.warning("%s", warning)
        for name, why in sorted(outcome.blocked.items()):
            log.warning("device %s withheld: %s", name, why)
        if self._state.update_policy_devices(outcome.eligible):
            log.info(
                "advertised devices changed: %d eligible, %d blocked",
                len(outcome.eligible),
                len(outcome.blocked),
            )
        # Publish even when membership did not change: the slices may have been deleted or edited.
        self._publisher.publish(self._state.advertised())

    def run(self, stop: threading.Event) -> None:
        self._trigger.set()
        while not stop.is_set():
            if not self._trigger.wait(0.5):
                continue
            self._trigger.clear()
            try:
                self.reconcile()
            except Exception:
                log.exception("policy reconcile failed; retrying")
                stop.wait(1.0)
                self._trigger.set()


class TriggeredWorker(Protocol):
    """A loop that runs until stop and can be woken early (PolicyController, RepairWorker)."""

    def run(self, stop: threading.Event) -> None: ...

    def trigger(self) -> None: ...


def start_threads(
    stop: threading.Event,
    controller: TriggeredWorker,
    sources: Sequence[tuple[str, Callable[..., Any], Mapping[str, Any]]],
    watch: Callable[[str, Callable[..., Any], Mapping[str, Any], Callable[[], None], threading.Event], None],
    name: str = "policy-reconcile",
) -> list[threading.Thread]:
    threads = [threading.Thread(target=controller.run, args=(stop,), name=name, daemon=True)]
    threads += [
        threading.Thread(
            target=watch, args=(what, fn, kw, controller.trigger, stop), name=f"watch-{what}", daemon=True
        )
        for what, fn, kw in sources
    ]
    for t in threads:
        t.start()
    return threads


def managed_service(
    api: client.ApiClient,
    *,
    node_name: str,
    node_uid: str,
    host: Preparer,
    checkpoint: PreparedClaims,
    state: DeviceState,
    source: PolicySource,
    observer: PhaseObserver | None = None,
) -> ManagedPreparer:
    """The managed NodeService over the live API (--multus-auto-attach)."""
    from driver.claimstatus import DeviceStatusWriter  # noqa: PLC0415 - keeps the unmanaged start-up lean
    from driver.consumer import ConsumerResolver  # noqa: PLC0415
    from driver.events import NULL_OBSERVER  # noqa: PLC0415
    from driver.kube import KubeClaims, KubeNads, KubePods, KubeShadowLister  # noqa: PLC0415
    from driver.managed import ManagedPreparer  # noqa: PLC0415

    pods = KubePods(api)
    claims = KubeClaims(api)

    def eligible_attributes(name: str) -> Mapping[str, object] | None:
        advertised = state.lookup(name)[1]
        return None if advertised is None else dict(advertised.attributes)

    return ManagedPreparer(
        host=host,
        resolver=ConsumerResolver(
            pods=pods,
            claims=claims,
            node_name=node_name,
            node_uid=node_uid,
            live_node_uid=lambda: source.node()[0],
        ),
        nads=KubeNads(api),
        pods=pods,
        checkpoint=checkpoint,
        node_name=node_name,
        node_uid=node_uid,
        eligible_attributes=eligible_attributes,
        observer=observer or NULL_OBSERVER,
        device_status=DeviceStatusWriter(claims),
        shadow_lister=KubeShadowLister(api),
    )


def start_repair(
    stop: threading.Event,
    service: ManagedPreparer,
    checkpoint: PreparedClaims,
    *,
    interval: float,
    observer: PhaseObserver,
    metrics: DriverMetrics,
    sources: Sequence[tuple[str, Callable[..., Any], Mapping[str, Any]]],
    watch: Callable[[str, Callable[..., Any], Mapping[str, Any], Callable[[], None], threading.Event], None],
) -> RepairWorker:
    """The repair worker's first pass, run now (before the plugin serves), then its thread and the
    watches that wake it early."""
    from driver.repair import RepairWorker  # noqa: PLC0415

    worker = RepairWorker(
        service,
        checkpoint.snapshot_all,
        interval=interval,
        observer=observer,
        metrics=metrics,
        listing=service.list_shadows,
    )
    outcomes = worker.run_once()
    failed = {uid: why for uid, why in outcomes.items() if why}
    log.info("start-up repair: %d claims, %d not converged %s", len(outcomes), len(failed), failed or "")
    start_threads(stop, worker, sources, watch, name="repair")
    return worker
