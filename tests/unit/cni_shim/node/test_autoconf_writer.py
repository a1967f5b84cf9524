"""multusConfigFile auto on disk: primary discovery, the written file, regeneration, readiness loss."""

from __future__ import annotations

import json
import re
import stat
import threading
import time
from pathlib import Path

import pytest

from cni_shim.core import autoconf
from cni_shim.node.autoconf import ConfigWriter
from sriov_contract.errors import ReasonedError

PRIMARY = {"cniVersion": "0.4.0", "name": "primary-net", "type": "flannel"}


def _writer(tmp_path: Path, **keys) -> tuple[ConfigWriter, list[tuple[str, str]]]:
    (tmp_path / "auto").mkdir(exist_ok=True)
    (tmp_path / "net.d").mkdir(exist_ok=True)
    conf = autoconf.settings(
        {
            "cniVersion": "0.4.0",
            "multusConfigFile": "auto",
            "multusAutoconfigDir": str(tmp_path / "auto"),
            "cniConfigDir": str(tmp_path / "net.d"),
            **keys,
        }
    )
    logged: list[tuple[str, str]] = []
    return ConfigWriter(
        conf,
        lambda level, msg, **f: logged.append((level, msg)),
        find_tries=2,
        interval=0.02,
        readiness_timeout=0.1,
        sleep=lambda s: None,
    ), logged


def _poll(check, what: str, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.01)
    return value


def test_writes_the_generated_file_0600_and_removes_it(tmp_path):
    writer, logged = _writer(tmp_path)
    (tmp_path / "auto" / "20-b.conf").write_text(json.dumps(PRIMARY))
    (tmp_path / "auto" / "10-a.conflist").write_text(
        json.dumps({**PRIMARY, "plugins": [{"type": "x", "capabilities": {"mac": True}}]})
    )
    writer.prepare()
    stop = threading.Event()
    thread = writer.start(stop, lambda: None)
    out = tmp_path / "net.d" / "00-multus.conf"
    assert json.loads(out.read_text()) == {
        "capabilities": {"mac": True},
        "cniVersion": "0.4.0",
        "name": "multus-cni-network",
        "clusterNetwork": str(tmp_path / "auto" / "10-a.conflist"),
        "type": "multus-shim",
    }
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [p.name for p in (tmp_path / "net.d").iterdir()] == ["00-multus.conf"]  # no temporary left
    assert logged[0][1] == f"wrote {out}"
    stop.set()
    thread.join(5)
    writer.remove()
    writer.remove()  # already gone: fine
    assert not out.exists()


def test_regenerates_when_the_primary_changes_and_keeps_the_last_good_file(tmp_path):
    writer, logged = _writer(tmp_path)
    primary = tmp_path / "auto" / "10-a.conf"
    primary.write_text(json.dumps(PRIMARY))
    writer.prepare()
    stop = threading.Event()
    writer.start(stop, lambda: None)
    out = tmp_path / "net.d" / "00-multus.conf"
    primary.write_text(json.dumps({**PRIMARY, "capabilities": {"portMappings": True}, "pad": "x" * 10}))
    _poll(lambda: "portMappings" in out.read_text(), "the regenerated file")
    primary.write_text(json.dumps({**PRIMARY, "cniVersion": "0.3.1", "pad": "y" * 40}))  # refused now
    _poll(lambda: any(level == "error" for level, _ in logged), "the refusal logged")
    assert "portMappings" in out.read_text()  # Multus would write an empty file; we keep the last good one
    stop.set()


def test_master_cni_names_the_primary_and_force_version_rewrites_it(tmp_path):
    writer, _ = _writer(tmp_path, multusMasterCNI="30-c.conf", forceCNIVersion=True, cniVersion="1.0.0")
    (tmp_path / "auto" / "10-a.conf").write_text(json.dumps(PRIMARY))
    (tmp_path / "auto" / "30-c.conf").write_text(json.dumps({**PRIMARY, "cniVersion": "0.3.1"}))
    writer.prepare()
    assert writer.primary_path == str(tmp_path / "auto" / "30-c.conf")
    assert json.loads((tmp_path / "auto" / "30-c.conf").read_text())["cniVersion"] == "1.0.0"


def test_refusals_name_multus_errors(tmp_path):
    writer, _ = _writer(tmp_path)
    with pytest.raises(ReasonedError, match="could not find a plugin configuration in"):
        writer.prepare()  # nothing there after the tries
    (tmp_path / "auto" / "10-a.conf").write_text(json.dumps({**PRIMARY, "cniVersion": "0.3.1"}))
    with pytest.raises(
        ReasonedError, match=re.escape("delegate cni version is 0.3.1 while top level cni version is 0.4.0")
    ):
        writer.prepare()
    missing, _ = _writer(tmp_path, multusMasterCNI="99-none.conf")
    with pytest.raises(ReasonedError, match="failed to access the primary CNI configuration from"):
        missing.prepare()
    gone, _ = _writer(tmp_path, multusAutoconfigDir=str(tmp_path / "absent"))
    with pytest.raises(ReasonedError, match="error when listing the CNI plugin configurations"):
        gone.prepare()


def test_readiness_file_is_awaited_then_its_loss_removes_the_file(tmp_path):
    ready = tmp_path / "ready"
    writer, logged = _writer(tmp_path, readinessindicatorfile=str(ready))
    (tmp_path / "auto" / "10-a.conf").write_text(json.dumps(PRIMARY))
    with pytest.raises(ReasonedError, match="still waiting for readinessindicatorfile"):
        writer.prepare()
    ready.write_text("")
    writer.prepare()
    lost = threading.Event()
    writer.start(threading.Event(), lost.set)
    out = tmp_path / "net.d" / "00-multus.conf"
    assert out.exists()
    ready.unlink()
    assert lost.wait(5)
    assert not out.exists()
    assert logged[-1][0] == "warning"
