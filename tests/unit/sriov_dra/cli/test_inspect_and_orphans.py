"""The admin commands' pure views: Pod interface rows, manual conflicts, tables, the orphan report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sriov_contract.keys import NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION, REGISTRY_ANNOTATION
from sriov_contract.registry import parse_registry
from sriov_dra.cli import cli
from sriov_dra.cli import inspect as cli_inspect
from sriov_dra.cli.common import table
from sriov_dra.cli.inspect import interface_rows, manual_conflicts
from sriov_dra.cli.orphans import render_scan
from sriov_dra.kube import resources as kube
from sriov_dra.recovery.orphans import correlate
from tests.fakes.driver_env import NAME_ATTR, NODE_UID, NS, Env, vf_config
from tests.fakes.sysfs import add_pf

VF1 = "0000-17-00-1"


def prepared(env: Env):
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    return env.live_pod(pod), ref, shadow


def test_interface_rows_join_registry_shadow_claim_slice_status_and_checkpoint(env: Env) -> None:
    pod, ref, shadow = prepared(env)
    name = shadow["metadata"]["name"]
    pod["metadata"]["annotations"][NETWORK_STATUS_ANNOTATION] = json.dumps(
        [{"name": "cluster", "interface": "eth0", "ips": ["10.0.0.5"]}, {"name": f"{NS}/{name}", "interface": "dra0", "ips": ["10.56.217.171"]}]
    )  # fmt: skip
    claim = env.api.stored("claims", NS, ref.name)
    devices = {VF1: {"sriovnetwork.k8snetworkplumbingwg.io/PFName": {"string": "ens1f0"}, "resource.kubernetes.io/pcieRoot": {"string": "pci0000:16"}}}  # fmt: skip
    (row,) = interface_rows(
        pod, {(NS, name): shadow}, {ref.uid: claim}, devices, env.checkpoint.snapshot_all()
    )
    assert row == {
        "shadow": name,
        "interface": "dra0",
        "claimUID": ref.uid,
        "claim": f"{NS}/{ref.name}",
        "request": "vf",
        "device": VF1,
        "pciAddress": "0000:17:00.1",
        "pf": "ens1f0",
        "pcieRoot": "pci0000:16",
        "source": f"{NS}/rail-a",
        "phase": "Ready",
        "ips": ["10.56.217.171"],
    }
    # without the node's checkpoint the phase is unknown, a vanished shadow is named as such
    (gone,) = interface_rows(pod, {(NS, name): None}, {ref.uid: claim}, devices, None)
    assert gone["phase"] == "ShadowMissing" and gone["ips"] == ["10.56.217.171"]


def test_manual_conflicts_name_each_colliding_hand_written_selection(env: Env) -> None:
    pod, _ref, _shadow = prepared(env)
    entries = parse_registry(pod["metadata"]["annotations"][REGISTRY_ANNOTATION]).entries
    nets = json.loads(pod["metadata"]["annotations"][NETWORKS_ANNOTATION])
    nets += [
        {"name": "rail-a", "namespace": NS},
        {"name": "other", "namespace": NS, "interface": "dra0"},
        {"name": "fine", "namespace": NS, "interface": "net9"},
    ]
    pod["metadata"]["annotations"][NETWORKS_ANNOTATION] = json.dumps(nets)
    assert manual_conflicts(pod, entries, [f"{NS}/rail-a"]) == [
        f"{NS}/rail-a: selected by hand although the driver attaches it automatically",
        f"{NS}/other: asks for interface dra0, which a managed network uses",
    ]


def test_table_aligns_and_marks_empty_cells() -> None:
    assert table(("A", "BB"), [("x", ""), ("long", "y")]) == "A     BB\nx     -\nlong  y\n"


def test_orphan_report_lists_foreign_finalizers_separately(env: Env) -> None:
    prepared(env)
    (shadow,) = env.shadows()
    shadow["metadata"]["finalizers"].append("example.com/keep")
    text = render_scan(correlate([shadow], [], NODE_UID))
    assert "Orphan" in text and "foreign finalizers" in text and "example.com/keep" in text
    assert text.endswith(
        "1 orphan(s) of 1 shadow(s); dry run, nothing changed (finalize one with --finalize <ATTACHMENT-ID> after fencing its workload)\n"
    )


class PolicySource:
    """What the API would answer: one policy whose first config's DeviceAttributes disagree."""

    def __init__(self, _api: object, namespace: str, node: str) -> None:
        assert (namespace, node) == ("policies-ns", "node-a")

    def node(self) -> tuple[str, dict[str, str]]:
        return NODE_UID, {"kubernetes.io/hostname": "node-a"}

    def policies(self) -> list[dict[str, Any]]:
        rail_a = {
            "resourceFilters": [{"pfNames": ["ens1f0"]}],
            "deviceAttributesSelector": {"matchLabels": {"rail": "a"}},
        }
        rail_b = {"resourceFilters": [{"pfNames": ["ens2f0"]}]}
        return [{"metadata": {"name": "rails"}, "spec": {"configs": [rail_a, rail_b]}}]

    def device_attributes(self) -> list[dict[str, Any]]:
        return [
            {
                "metadata": {"name": name, "labels": {"rail": "a"}},
                "spec": {"attributes": {NAME_ATTR: {"string": nad}}},
            }
            for name, nad in (("rail-a-1", "rail-a-net"), ("rail-a-2", "other-net"))
        ]


class NoShadows:
    def __init__(self, _api: object) -> None:
        pass

    def list_shadows(self, _node_uid: str) -> list[dict[str, Any]]:
        return []


def _inspect_node_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`sriov-dra inspect node` over two PFs' sysfs and fake API adapters."""
    sysfs = tmp_path / "sys"
    add_pf(sysfs, "0000:17:00.0", "ens1f0", 2)
    add_pf(sysfs, "0000:31:00.0", "ens2f0", 1, pcie_root="pci0000:30", port="0000:30:01.0")
    monkeypatch.setattr(cli_inspect, "api_client", lambda _kubeconfig: object())
    monkeypatch.setattr(cli_inspect, "node_uid", lambda _api, _node: NODE_UID)
    monkeypatch.setattr(kube, "KubePolicySource", PolicySource)
    monkeypatch.setattr(kube, "KubeShadowLister", NoShadows)
    args = ["inspect", "node", "--node", "node-a", "--namespace", "policies-ns", "--sysfs-root", str(sysfs)]
    args += ["--checkpoint", str(tmp_path / "checkpoint.json")]
    return args


def test_inspect_node_names_each_blocked_device_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = _inspect_node_args(tmp_path, monkeypatch)

    result = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    blocked = json.loads(result.output)["blockedDevices"]
    assert [b["device"] for b in blocked] == ["0000-17-00-1", "0000-17-00-2"]  # ens2f0's VF is not blocked
    for entry in blocked:
        assert entry["why"].startswith("ConflictingTemplateReference: DeviceAttributes rail-a-1 selects NAD")
        assert "rail-a-2" in entry["why"] and "other-net" in entry["why"]

    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    at = lines.index("blocked devices: 2")
    assert [line.split(":", 1)[0] for line in lines[at + 1 :]] == ["  0000-17-00-1", "  0000-17-00-2"]
    assert lines[at + 1] == f"  0000-17-00-1: {blocked[0]['why']}"


def test_cli_refusals_are_one_line_without_traceback(tmp_path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [a kubeconfig")
    result = CliRunner().invoke(cli, ["inspect", "pod", "no-slash", "--kubeconfig", str(bad)])
    assert result.exit_code == 2 and result.output.strip().startswith("sriov-dra: InvalidTarget:")
    result = CliRunner().invoke(cli, ["orphans", "--node", "n", "--kubeconfig", str(bad)])
    assert result.exit_code == 2 and result.output.strip().startswith("sriov-dra: NoClusterAccess:")


def test_inspect_node_lists_the_devices_sysfs_shows_unhealthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = _inspect_node_args(tmp_path, monkeypatch)
    (tmp_path / "sys" / "class" / "net" / "ens1f0" / "operstate").write_text("down\n")

    result = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["unhealthyDevices"] == [
        {"device": "0000-17-00-1", "why": "PFLinkDown: PF ens1f0 of VF 0000-17-00-1 is down"},
        {"device": "0000-17-00-2", "why": "PFLinkDown: PF ens1f0 of VF 0000-17-00-2 is down"},
    ]
    lines = CliRunner().invoke(cli, args).output.splitlines()
    at = lines.index("unhealthy devices: 2")
    assert lines[at + 1] == "  0000-17-00-1: PFLinkDown: PF ens1f0 of VF 0000-17-00-1 is down"
