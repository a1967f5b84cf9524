"""Reading a VF's health evidence from a sysfs root: its bus entry and its PF's link files."""

from pathlib import Path

from sriov_dra.core.devicehealth import judge_all
from sriov_dra.sysfs.discovery import discover
from sriov_dra.sysfs.linkstate import observe
from tests.fakes.sysfs import add_pf


def test_link_files_and_a_vanished_vf_are_observed(tmp_path: Path) -> None:
    add_pf(tmp_path, "0000:17:00.0", "ens1f0", 2)
    inventory = discover(tmp_path)
    net = tmp_path / "class" / "net" / "ens1f0"

    # no operstate or carrier at all: nothing says the link is down
    assert all(v.healthy for v in judge_all(observe(tmp_path, inventory)).values())

    (net / "operstate").write_text("down\n")
    seen = observe(tmp_path, inventory)
    assert {o.pf_operstate for o in seen.values()} == {"down"}
    assert {v.reason for v in judge_all(seen).values()} == {"PFLinkDown"}

    (net / "operstate").write_text("up\n")
    (net / "carrier").write_text("1\n")
    (tmp_path / "bus" / "pci" / "devices" / "0000:17:00.2").unlink()
    verdicts = judge_all(observe(tmp_path, inventory))
    assert verdicts["0000-17-00-1"].healthy and verdicts["0000-17-00-2"].reason == "VFMissing"
