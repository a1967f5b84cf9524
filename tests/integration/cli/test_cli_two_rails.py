"""`sriov-dra inspect` and `orphans` against the running two-rail GPU/NIC-pairs fixture (spec 14.2):
the real driver, thick CNI, simulated kubelet and scheduler; the CLI reads the API and the
driver's checkpoint. Every value it prints is checked against what the test bed observed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.scenario import running_pairs
from testbed.stack import Stack

pytestmark = [pytest.mark.integration, pytest.mark.netns]

CLI = str(Path(sys.executable).parent / "sriov-dra")


def sriov_dra(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args, "--kubeconfig", str(stack.bed.kubeconfig), "--checkpoint", str(stack.driver.checkpoint)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_inspect_and_orphans_on_the_two_rail_fixture(thick_stack) -> None:
    stack = thick_stack
    with running_pairs(stack) as run:
        obs = run.observe()
        ns, name = obs.pod["metadata"]["namespace"], obs.pod["metadata"]["name"]
        claim = f"{ns}/{obs.claim['metadata']['name']}"

        out = sriov_dra(stack, "inspect", "pod", f"{ns}/{name}", "-o", "json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["pod"]["uid"] == obs.uid and doc["manualConflicts"] == []
        got = {r["request"]: r for r in doc["interfaces"]}
        assert set(got) == {r.request for r in obs.rows}
        for row in obs.rows:
            g = got[row.request]
            assert (
                g["claim"],
                g["pciAddress"],
                g["pcieRoot"],
                g["source"],
                g["shadow"],
                g["interface"],
            ) == (
                claim,
                row.vf_pci,
                row.pcie_root,
                row.source_nad,
                row.shadow_nad,
                row.interface,
            )
            assert g["phase"] == "Ready"
            assert g["pf"] == stack.fake_node.vf(row.vf_pci).pf
            assert g["device"] == row.vf_pci.replace(":", "-").replace(".", "-")
            assert [ip.split("/")[0] for ip in g["ips"]] == [row.ip.split("/")[0]]

        text = sriov_dra(stack, "inspect", "pod", f"{ns}/{name}")
        assert text.returncode == 0, text.stderr
        lines = text.stdout.splitlines()
        assert lines[0] == f"Pod {ns}/{name} ({obs.uid})"
        assert lines[1].split() == [
            "CLAIM", "REQUEST", "DEVICE", "PCI", "PF", "PCIE-ROOT", "SOURCE-NAD", "SHADOW", "INTERFACE", "IPS", "PHASE"
        ]  # fmt: skip
        table_rows = {cells[1]: cells for cells in (line.split() for line in lines[2:])}
        assert len(lines) == 2 + len(obs.rows)
        for row in obs.rows:
            g = got[row.request]
            assert table_rows[row.request] == [
                claim, row.request, g["device"], row.vf_pci, g["pf"], row.pcie_root, row.source_nad,
                row.shadow_nad, row.interface, row.ip.split("/")[0], "Ready",
            ]  # fmt: skip

        node = sriov_dra(stack, "inspect", "node", "--node", stack.bed.node_name, "-o", "json",
                         "--sysfs-root", str(stack.fake_node.sysfs_root), "--namespace", "dra-driver-sriov")  # fmt: skip
        assert node.returncode == 0, node.stderr
        ndoc = json.loads(node.stdout)
        assert ndoc["bindingsByPhase"] == {"Ready": 2} and ndoc["orphans"] == []
        assert sorted(b["pciAddress"] for b in ndoc["bindings"]) == sorted(r.vf_pci for r in obs.rows)

        orphans = sriov_dra(stack, "orphans", "--node", stack.bed.node_name, "-o", "json")
        assert orphans.returncode == 0, orphans.stderr
        odoc = json.loads(orphans.stdout)
        assert odoc["orphans"] == [] and odoc["dryRun"] is True
        assert sorted((s["name"], s["status"]) for s in odoc["shadows"]) == sorted(
            (r.shadow_nad, "Ready") for r in obs.rows
        )
        otext = sriov_dra(stack, "orphans", "--node", stack.bed.node_name)
        assert "0 orphan(s) of 2 shadow(s); dry run, nothing changed" in otext.stdout
