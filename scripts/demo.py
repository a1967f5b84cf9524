"""`make demo` (interim, until the end-to-end issue lands): bring up the real test bed, show what
it is, say plainly which product pieces are not built yet, and tear it all down again."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from kubernetes import client  # noqa: E402 - after the sys.path entry for the repo

from sriov_contract.errors import ReasonedError  # noqa: E402
from tests.bed import controlplane  # noqa: E402
from tests.bed.bed import TestBed  # noqa: E402
from tests.bed.tools import COMPONENTS, ToolSet  # noqa: E402

# Console scripts whose placeholder says "not implemented yet" until their issue lands.
CONSOLE_SCRIPTS = ("sriov-dra-driver", "cni-shim", "cni-shim-daemon", "sriov-dra")
END_TO_END = "the two GPU/NIC pairs example end to end (issue 11, 'End to end')"


def say(line: str = "") -> None:
    print(line, flush=True)


def placeholder_scripts() -> list[str]:
    """Console scripts that still answer '--help' with their not-implemented placeholder."""
    missing = []
    bindir = Path(sys.executable).parent
    for name in CONSOLE_SCRIPTS:
        exe = bindir / name
        if not exe.exists():
            missing.append(f"{name} (console script not installed; run 'make venv')")
            continue
        out = subprocess.run(
            [str(exe), "--help"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if "not implemented yet" in out.stdout + out.stderr:
            missing.append((out.stderr or out.stdout).strip().splitlines()[-1])
    return missing


def describe(bed: TestBed) -> None:
    st = bed.state
    say(
        f"  Kubernetes {st.versions.get('kubernetes')} (kube-apiserver, kube-controller-manager, kube-scheduler)"
    )
    say(f"  etcd {st.versions.get('etcd')}")
    say(f"  API server:      {bed.server}  (ready in {st.timings.get('apiserver_ready_s', 0):.1f}s)")
    say(f"  admin kubeconfig {bed.kubeconfig}")
    say(f"  identities:      {', '.join(f'{i} ({bed.user_of(i)})' for i in sorted(st.kubeconfigs))}")
    say(f"  audit log:       {st.audit_log}")
    core = client.CoreV1Api(bed.api_client)
    node = core.read_node(bed.node_name)
    ready = [c.status for c in (node.status.conditions if node.status else None) or [] if c.type == "Ready"]
    say(
        f"  node:            {bed.node_name} uid={bed.node_uid} Ready={ready[0] if ready else '?'} (no kubelet: simulated)"
    )
    crds = client.ApiextensionsV1Api(bed.api_client).list_custom_resource_definition().items
    say(f"  CRDs:            {', '.join(str(c.metadata.name) for c in crds if c.metadata) or 'none'}")
    rss = bed.peak_rss_kib()
    say("  peak RSS so far: " + ", ".join(f"{name} {kib // 1024} MiB" for name, kib in rss.items()))


def main() -> int:
    tools = ToolSet()
    say("== auto-sriov demo (interim): the local test bed ==")
    say("Third-party tools (built from the Go module proxy, cached per version):")
    for component in COMPONENTS:
        st = tools.status(component)
        say(f"  {component:<12} {'ready' if st.usable else 'NOT USABLE: ' + st.reason}  {st.directory}")

    say("\nStarting etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback...")
    started = time.monotonic()
    try:
        bed = controlplane.start(tools=tools, run_id=controlplane.new_run_id("demo"))
    except ReasonedError as exc:
        say(f"demo: the test bed could not start: {exc.reason}: {exc.message}")
        return 1
    try:
        say(f"Test bed up in {time.monotonic() - started:.1f}s:")
        describe(bed)
    finally:
        bed.stop()
    say("Test bed stopped and cleaned up.")

    say("\nNot built yet:")
    for line in [*placeholder_scripts(), END_TO_END]:
        say(f"  - {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
