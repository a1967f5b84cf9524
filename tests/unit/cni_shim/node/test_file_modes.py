"""Files the shim leaves on the node are as tight as their readers allow (issue #31 item 6): the
delegate cache, its results and the plugins' VERSION answers are read only by the shim (root),
and so is its logFile (0600, as Multus's logger creates it). The daemon's socket: 0600 in a 0700
directory (tests/unit/cni_shim/thick/test_shim_and_server.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from cni_shim.errors import CniError
from cni_shim.kube import kubeconfig
from cni_shim.node.cache import FileCacheStore
from cni_shim.node.logs import Logger
from cni_shim.node.versioncache import FileVersionCache


@pytest.fixture(autouse=True)
def loose_umask() -> Iterator[None]:
    old = os.umask(0o022)  # a node's usual umask: anything not asked for explicitly ends up 0644/0755
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_delegate_cache_and_its_results_are_private_to_root(tmp_path):
    cni_dir = tmp_path / "multus"
    store = FileCacheStore(str(cni_dir))
    store.save_plan("c1", b"{}")
    store.save_result("net-c1-eth0", b"{}")
    assert (_mode(cni_dir), _mode(cni_dir / "c1")) == (0o700, 0o600)
    assert (_mode(cni_dir / "results"), _mode(cni_dir / "results" / "net-c1-eth0")) == (0o700, 0o600)


class _Answers:
    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        return b'{"cniVersion":"1.1.0","supportedVersions":["1.1.0"]}'


def test_the_version_answers_are_private_to_root(tmp_path):
    plugin = tmp_path / "bin" / "ptp"
    plugin.parent.mkdir()
    plugin.write_text("")
    plugin.chmod(0o755)
    cache = FileVersionCache(_Answers(), str(tmp_path / "versions"))
    cache.execute("ptp", [str(plugin.parent)], {"CNI_COMMAND": "VERSION"}, b"{}")
    (answer,) = (tmp_path / "versions").iterdir()
    assert (_mode(tmp_path / "versions"), _mode(answer)) == (0o700, 0o600)


def test_the_log_file_is_created_0600_and_appended_to(tmp_path):
    path = tmp_path / "cni-shim.log"
    Logger("error", False, str(path)).error("one")
    Logger("error", False, str(path)).error("two")
    assert _mode(path) == 0o600
    assert [line.split(" ", 2)[2] for line in path.read_text().splitlines()] == ["one", "two"]


def test_a_broken_yaml_kubeconfig_is_named_without_quoting_its_lines(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("users:\n- name: u\n  user:\n    token: s3cr3t-token-value\n  : x: [\n")
    with pytest.raises(CniError) as err:
        kubeconfig.load(str(path))
    assert "s3cr3t-token-value" not in err.value.message
    assert (
        "neither JSON nor YAML (expected <block end>, but found ':' at line 5, column 3)" in err.value.message
    )
