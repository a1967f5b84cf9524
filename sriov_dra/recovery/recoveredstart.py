"""Opening the checkpoint at start-up, and the start from a damaged one (issue 35 item 5).

A sound current file is simply read. Otherwise the decision (sriov_dra.core.checkpointrecovery)
names the generation to start from; in managed mode the bindings it lacks are rebuilt from this
node's shadows and claims (sriov_dra.core.rebuild) before anything is moved or written, so a start
that dies half-way (the API unreachable, say) finds the same files and does the same again. Only
then are the damaged files moved aside, the starting records written as the current generation,
the recovery recorded for `sriov-dra inspect node` and told (the caller's `tell`: a Warning log
line, a metric and an Event on the Node). Repair's first pass, which runs before the plugin
serves, reconciles the records against the API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sriov_dra.core.checkpointrecovery import Recovery
from sriov_dra.core.rebuild import Rebuild, rebuild
from sriov_dra.model import RdmaDevice
from sriov_dra.ports import ClaimLister, PodLister, ShadowLister
from sriov_dra.recovery.listing import claims_in
from sriov_dra.state.checkpoint import GenerationFiles, PreparedClaims, RecoveryLog


@dataclass(frozen=True)
class ApiListings:
    """What a rebuild lists: this node's shadows and Pods, the claims of their namespaces."""

    shadows: ShadowLister
    claims: ClaimLister
    pods: PodLister


def open_checkpoint(
    files: GenerationFiles,
    *,
    node_name: str,
    node_uid: str,
    listings: ApiListings | None,
    pci_of: Mapping[str, str],
    now: datetime,
    rdma_of: Mapping[str, RdmaDevice] | None = None,
    tell: Callable[[Recovery], None],
) -> PreparedClaims:
    """The checkpoint to serve from; `listings` is None where nothing can be rebuilt (plain mode)."""
    start = files.decide()
    if not start.recovered:
        return PreparedClaims(files, str(files.path), records=start.records)
    rebuilt = Rebuild((), ())
    if listings is not None:
        shadows = list(listings.shadows.list_shadows(node_uid))
        pods = list(listings.pods.list_node_pods(node_name))
        # The claims a rebuild needs are in the namespaces of this node's shadows and Pods (a
        # claim lives in its Pod's namespace): the checkpoint may no longer name them.
        namespaces = {str((o.get("metadata") or {}).get("namespace") or "") for o in [*shadows, *pods]} - {""}
        rebuilt = rebuild(
            shadows,
            start.records,
            claims_in(listings.claims, namespaces),
            {str(p["metadata"]["uid"]): p for p in pods},
            node_name=node_name,
            node_uid=node_uid,
            pci_of=pci_of,
            rdma_of=rdma_of,
        )
    moved = files.quarantine(start, now.strftime("%Y%m%dT%H%M%SZ"))
    records = {**start.records, **{r.claim_uid: r for r in rebuilt.records}}
    checkpoint = PreparedClaims(files, str(files.path), records=records)
    checkpoint.persist()
    recovery = Recovery(
        time=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        node=node_name,
        start=start,
        moved=moved,
        rebuilt=tuple(r.claim_uid for r in rebuilt.records),
        not_rebuilt=rebuilt.not_rebuilt,
    )
    RecoveryLog(files.path).write(recovery.to_json())
    tell(recovery)
    return checkpoint
