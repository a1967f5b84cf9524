"""etcd compacted on a running bed, so that what a watcher saw before is gone (the API server's
stop and start are `testbed.controlplane.stop_apiserver` and `start_apiserver`).

Issue #35 item 4: a real cluster loses its API server (an upgrade, a crash, a lost quorum) while
nodes keep running Pods; the node agents must ride it out and relist when it returns. The
restarted API server also starts with an empty watch cache, so a watch resumed from a
resourceVersion of before the outage gets 410 Gone, as after an etcd compaction in a long-lived
cluster.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

from testbed.bed import TestBed


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
