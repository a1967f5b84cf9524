"""Which delegates of a plan run at the same time (issue 36): the plan cut into waves.

A wave is a run of consecutive delegates started together; a wave ends before the next one starts.
Delegate order, results, network-status, Events, the cache and the rollback are still read in plan
order (cni_shim.handler.add), so only the wall-clock time changes. Who may share a wave:

- a managed shadow: the driver rendered it for one VF, with its own interface name and its own
  IPAM pool, and its chain is the allowlisted one (sriov, then IPAM, tuning or rdma), so nothing
  it does touches what another shadow does;
- an ordinary NAD only where the configuration asks (`parallelOrdinaryDelegates`): its chain may
  be anything, and two NADs may share an IPAM range or a host device, as Multus never has to
  consider;
- never the first delegate (the cluster network: Multus runs it first and alone, and its netns
  check comes first), nor one that replaces default routes (the route table keeps Multus's order).

A limit of one gives Multus's serial order exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from cni_shim.core.delegateplan import PlannedDelegate

Wave = tuple[int, ...]


def _may_overlap(idx: int, d: PlannedDelegate, ordinary: bool) -> bool:
    return idx > 0 and not d.master and not d.route_override and (d.managed or ordinary)


def waves(delegates: Sequence[PlannedDelegate], *, limit: int, ordinary: bool) -> tuple[Wave, ...]:
    """Indexes of `delegates` in plan order, grouped; a delegate that may not overlap is alone."""
    out: list[Wave] = []
    current: list[int] = []
    for idx, d in enumerate(delegates):
        if limit > 1 and _may_overlap(idx, d, ordinary):
            current.append(idx)
            continue
        if current:
            out.append(tuple(current))
            current = []
        out.append((idx,))
    if current:
        out.append(tuple(current))
    return tuple(out)


def teardown_waves(delegates: Sequence[PlannedDelegate], *, limit: int, ordinary: bool) -> tuple[Wave, ...]:
    """DEL's order: the waves last first, each wave's members last first (Multus deletes in reverse)."""
    return tuple(tuple(reversed(w)) for w in reversed(waves(delegates, limit=limit, ordinary=ordinary)))
