"""The node-state reporter: this node's sysfs inventory as SriovNetworkNodeState/<node>.status.

Sysfs has no change events, so the worker polls (--interval); a pass that finds the reported
inventory current writes nothing, so polling costs one GET.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sriov_operator.core.nodestate import PfReading, status_patch
from sriov_operator.ports import NodeStateCluster
from sriov_operator.reasons import OperatorError

log = logging.getLogger(__name__)


class NodeStateReporter:
    def __init__(
        self,
        cluster: NodeStateCluster,
        *,
        namespace: str,
        node_name: str,
        read_inventory: Callable[[], Sequence[PfReading]],
    ) -> None:
        self._cluster = cluster
        self._ns = namespace
        self._node = node_name
        self._read = read_inventory
        self.writes = 0

    def reconcile(self) -> bool:
        try:
            pfs = self._read()
            state = self._cluster.get_node_state(self._ns, self._node)
            if state is None:
                self._cluster.create_node_state(self._ns, self._node)
                self.writes += 1
            patch = status_patch(state, pfs)
            if patch is not None:
                self._cluster.patch_node_state_status(self._ns, self._node, patch)
                self.writes += 1
                log.info(
                    "SriovNetworkNodeState %s/%s: reported %d PF(s), %d VF(s)",
                    self._ns, self._node, len(pfs), sum(len(p.vfs) for p in pfs),
                )  # fmt: skip
        except OperatorError as exc:
            log.warning("node-state pass failed: %s", exc)
            return False
        return True
