"""The real cni-shim-daemon under kubelet's probes (--health-address): a stopped daemon fails both,
and the same process passes again once it runs.

No Kubernetes: the daemon runs in Multus's no-Kubernetes mode, so this needs no test bed.
"""

from __future__ import annotations

import os
import signal

from testbed.waiting import wait_for


def _times_out(daemon, path: str) -> bool:
    try:
        daemon.probe(path, timeout=1.0)
    except TimeoutError:
        return True
    except OSError as exc:
        return isinstance(getattr(exc, "reason", None), TimeoutError)
    return False


def test_a_stopped_daemon_fails_both_probes_and_passes_once_it_runs(cni_daemon, tmp_path) -> None:
    daemon = cni_daemon({"cniDir": str(tmp_path / "cache")}, kube=False)
    assert (daemon.probe("/healthz"), daemon.probe("/readyz")) == (200, 200)
    assert daemon.proc is not None
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        assert _times_out(daemon, "/healthz")
        assert _times_out(daemon, "/readyz")
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    wait_for(lambda: daemon.probe("/healthz") == 200, 10, what="/healthz after SIGCONT")
    assert daemon.probe("/readyz") == 200
