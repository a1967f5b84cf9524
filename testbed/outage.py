"""A control-plane outage on a running bed: kube-apiserver stopped and started again on the same
port, certificates and etcd, and etcd compacted so that what a watcher saw before is gone.

Issue #35 item 4: a real cluster loses its API server (an upgrade, a crash, a lost quorum) while
nodes keep running Pods; the node agents must ride it out and relist when it returns. The
restarted API server also starts with an empty watch cache, so a watch resumed from a
resourceVersion of before the outage gets 410 Gone, as after an etcd compaction in a long-lived
cluster.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from typing import Any

from testbed import processes
from testbed.bed import TestBed
from testbed.controlplane import APISERVER_READY_TIMEOUT, BedStartError, Binaries, apiserver_args
from testbed.processes import launch, log_tail
from testbed.waiting import WaitTimeout, wait_for

APISERVER = "kube-apiserver"
STOP_GRACE_S = 30.0


def _record(bed: TestBed) -> processes.ProcessRecord:
    for rec in bed.state.processes:
        if rec.name == APISERVER:
            return rec
    raise BedStartError("NoApiServer", f"the bed in {bed.state.run_dir} runs no {APISERVER}")


def stop_apiserver(bed: TestBed) -> None:
    """SIGTERM kube-apiserver and wait until it exited: its watches end as in a real restart."""
    processes.stop([_record(bed)], grace=STOP_GRACE_S)


def start_apiserver(bed: TestBed) -> float:
    """Start kube-apiserver again with the arguments the bed started it with; wait for /readyz.
    Returns how long it took. Call from the main thread: it dies with the thread that starts it."""
    state = bed.state
    old = _record(bed)
    binary = Binaries.resolve(bed.tools).apiserver
    argv = apiserver_args(binary, state, state.ports["etcd"], state.ports["apiserver"])
    log = state.log_dir / f"{APISERVER}.log"
    proc, rec = launch(APISERVER, argv, log, cwd=state.run_dir, die_with_parent=state.owner_pid is not None)
    state.processes[state.processes.index(old)] = rec
    state.save()
    started = time.monotonic()

    def ready() -> bool:
        if proc.poll() is not None:
            raise BedStartError("TestBedStartFailed", f"{APISERVER} exited on restart:\n{log_tail(log)}")
        return bed.healthy()

    try:
        wait_for(ready, APISERVER_READY_TIMEOUT, what=f"{APISERVER} /readyz after a restart", interval=0.2)
    except WaitTimeout as exc:
        raise BedStartError("TestBedStartFailed", f"{exc.message}:\n{log_tail(log)}") from None
    return time.monotonic() - started


def _etcd(bed: TestBed, call: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call of etcd's JSON gateway (no etcdctl in the bed's tools)."""
    url = f"http://127.0.0.1:{bed.state.ports['etcd']}/v3/{call}"
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    return answer


def compact_etcd(bed: TestBed) -> int:
    """Compact etcd up to its current revision (physically); returns that revision. Every
    resourceVersion before it is gone from etcd: a list or watch from one gets 410 Gone."""
    key = base64.b64encode(b"/registry/").decode()
    revision = int(_etcd(bed, "kv/range", {"key": key, "limit": 1})["header"]["revision"])
    _etcd(bed, "kv/compaction", {"revision": revision, "physical": True})
    return revision
