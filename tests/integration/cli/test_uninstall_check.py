"""`sriov-dra uninstall-check` on the real API server, under exactly the Helm pre-delete hook's
RBAC: a shadow, a NAD still carrying our finalizer and a claim allocated our devices each block
(exit 2, UninstallBlocked); once they are released nothing does (exit 0)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, PROTECTION_FINALIZER
from sriov_dra.model import DRIVER_NAME
from testbed.claims import RESOURCE_API, create_claim, custom_objects, get_claim
from tests.support.helm import hooks, render_chart

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
NAD_API = ("k8s.cni.cncf.io", "v1")
USER = "sriov-dra-uninstall-check"


@pytest.fixture(scope="module")
def hook_kubeconfig(testbed, helm) -> Path:
    """An identity bound by exactly the rules the chart's hook ClusterRole grants."""
    (role,) = [o for o in hooks(render_chart(helm)) if o["kind"] == "ClusterRole"]
    path = Path(testbed.issue_identity(USER, USER))
    testbed.grant(USER, role["rules"])
    return path


def check(kubeconfig: Path, tmp_path: Path) -> tuple[int, dict[str, Any], str]:
    out = subprocess.run(
        [
            str(BIN / "sriov-dra"),
            "uninstall-check",
            "--kubeconfig",
            str(kubeconfig),
            "--checkpoint",
            str(tmp_path / "absent.json"),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.returncode, json.loads(out.stdout), out.stderr


def nad(name: str, *, labels: dict[str, str], finalizers: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "labels": labels, "finalizers": finalizers},
        "spec": {"config": '{"cniVersion":"1.0.0","type":"sriov"}'},
    }


def allocate(testbed, ns: str, name: str) -> None:
    """What the scheduler writes for a claim it allocated one device of our driver."""
    claim = get_claim(testbed, ns, name)
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "vf", "driver": DRIVER_NAME, "pool": "node-a", "device": "vf-0"}]
            }
        }
    }
    custom_objects(testbed).replace_namespaced_custom_object_status(
        *RESOURCE_API, ns, "resourceclaims", name, claim
    )


def test_shadows_finalizers_and_allocated_claims_block_until_released(
    testbed, hook_kubeconfig, tmp_path
) -> None:
    ns = testbed.create_namespace("uninstall-check", exist_ok=True)
    objs = custom_objects(testbed)
    objs.create_namespaced_custom_object(
        *NAD_API,
        ns,
        "network-attachment-definitions",
        nad("dra-sriov-a", labels={MANAGED_BY_LABEL: MANAGED_BY_VALUE}, finalizers=[PROTECTION_FINALIZER]),
    )
    objs.create_namespaced_custom_object(
        *NAD_API,
        ns,
        "network-attachment-definitions",
        nad("relabelled", labels={}, finalizers=[PROTECTION_FINALIZER]),
    )
    objs.create_namespaced_custom_object(
        *NAD_API, ns, "network-attachment-definitions", nad("users-own", labels={}, finalizers=[])
    )
    create_claim(testbed, ns, "vfs", "sriovnetwork.k8snetworkplumbingwg.io")
    allocate(testbed, ns, "vfs")

    status, report, stderr = check(hook_kubeconfig, tmp_path)
    assert status == 2, stderr
    # Counted cluster-wide: another suite on the session's bed may hold shadows or claims too.
    kinds = Counter(b["kind"] for b in report["blockers"])
    assert min(kinds["shadow"], kinds["finalizer"], kinds["claim"]) >= 1, report
    assert stderr.startswith(
        f"sriov-dra: UninstallBlocked: {kinds['shadow']} shadow(s), {kinds['finalizer']} finalizer(s), "
        f"{kinds['claim']} claim(s) remain"
    ), stderr
    mine = {(b["kind"], b["name"]) for b in report["blockers"] if b["namespace"] == ns}
    assert mine == {("shadow", "dra-sriov-a"), ("finalizer", "relabelled"), ("claim", "vfs")}
    assert report["checkpoint"] is None and report["clear"] is False

    # Released as the driver would: our finalizer removed, shadows deleted, the claim gone.
    for name in ("dra-sriov-a", "relabelled"):
        objs.patch_namespaced_custom_object(
            *NAD_API, ns, "network-attachment-definitions", name, {"metadata": {"finalizers": None}}
        )
        objs.delete_namespaced_custom_object(*NAD_API, ns, "network-attachment-definitions", name)
    objs.delete_namespaced_custom_object(*RESOURCE_API, ns, "resourceclaims", "vfs")

    status, report, stderr = check(hook_kubeconfig, tmp_path)
    left = [b for b in report["blockers"] if b["namespace"] == ns]
    assert left == []
    if status != 0:  # another suite on the session's bed may hold claims or shadows of its own
        assert stderr.startswith("sriov-dra: UninstallBlocked:"), stderr
    else:
        assert report["clear"] is True
