"""The node agent's long-running orchestration: policy reconciliation and slice publication.

One worker thread reconciles whenever anything relevant changed (policies, DeviceAttributes, the
Node's labels, our ResourceSlices); triggers coalesce, so a burst of events costs one reconcile.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from sriov_dra.advertise.inventory import DeviceState
from sriov_dra.advertise.slices import SlicePublisher
from sriov_dra.core.policy import evaluate
from sriov_dra.ports import PolicySource

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


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
