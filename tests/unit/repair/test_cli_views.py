"""The admin commands' pure views: Pod interface rows, manual conflicts, tables, the orphan report."""

from __future__ import annotations

import json

from click.testing import CliRunner

from driver.cli import cli
from driver.cli_common import table
from driver.cli_inspect import interface_rows, manual_conflicts
from driver.cli_orphans import render_scan
from driver.orphans import correlate
from sriov_contract.keys import NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION, REGISTRY_ANNOTATION
from sriov_contract.registry import parse_registry
from tests.unit.managed.env import NODE_UID, NS, Env, vf_config

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


def test_cli_refusals_are_one_line_without_traceback(tmp_path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [a kubeconfig")
    result = CliRunner().invoke(cli, ["inspect", "pod", "no-slash", "--kubeconfig", str(bad)])
    assert result.exit_code == 2 and result.output.strip().startswith("sriov-dra: InvalidTarget:")
    result = CliRunner().invoke(cli, ["orphans", "--node", "n", "--kubeconfig", str(bad)])
    assert result.exit_code == 2 and result.output.strip().startswith("sriov-dra: NoClusterAccess:")
