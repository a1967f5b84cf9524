"""VERSION answers are remembered per binary file (in memory, or under cniDir in thin mode) and asked again once the file is replaced."""

from __future__ import annotations

import os
from pathlib import Path

from cni_shim.node.versioncache import FileVersionCache, VersionCache


class Counting:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def execute(self, plugin, search_path, env, stdin):
        self.calls.append(env["CNI_COMMAND"])
        return f'{{"n": {len(self.calls)}}}'.encode()


def plugin(directory: Path, body: str) -> Path:
    path = directory / "ptp"
    tmp = directory / ".ptp.tmp"
    tmp.write_text(body)
    tmp.chmod(0o755)
    os.replace(tmp, path)  # a new inode, as an upgrade installs it
    return path


def test_version_is_asked_once_per_binary_and_other_verbs_always_run(tmp_path):
    plugin(tmp_path, "#!/bin/sh\n")
    inner = Counting()
    cache = VersionCache(inner)
    version = {"CNI_COMMAND": "VERSION"}
    first = cache.execute("ptp", [str(tmp_path)], version, b"{}")
    assert cache.execute("ptp", [str(tmp_path)], version, b"{}") == first
    cache.execute("ptp", [str(tmp_path)], {"CNI_COMMAND": "ADD"}, b"{}")
    cache.execute("ptp", [str(tmp_path)], {"CNI_COMMAND": "ADD"}, b"{}")
    assert inner.calls == ["VERSION", "ADD", "ADD"]
    plugin(tmp_path, "#!/bin/sh\n# upgraded\n")
    assert cache.execute("ptp", [str(tmp_path)], version, b"{}") != first
    assert inner.calls == ["VERSION", "ADD", "ADD", "VERSION"]


def test_under_a_chroot_the_binary_is_found_below_the_root(tmp_path):
    (tmp_path / "opt/cni/bin").mkdir(parents=True)
    plugin(tmp_path / "opt/cni/bin", "#!/bin/sh\n")
    inner = Counting()
    cache = VersionCache(inner, str(tmp_path))
    for _ in range(2):
        cache.execute("ptp", ["/opt/cni/bin"], {"CNI_COMMAND": "VERSION"}, b"{}")
    assert inner.calls == ["VERSION"]


def test_thin_mode_asks_once_across_invocations_and_again_after_an_upgrade(tmp_path):
    bin_dir, answers = tmp_path / "bin", tmp_path / "cni" / "versions"
    bin_dir.mkdir()
    plugin(bin_dir, "#!/bin/sh\n")
    inner = Counting()
    version = {"CNI_COMMAND": "VERSION"}
    # Each thin invocation builds its own cache: only the files carry answers over.
    first = FileVersionCache(inner, str(answers)).execute("ptp", [str(bin_dir)], version, b"{}")
    assert FileVersionCache(inner, str(answers)).execute("ptp", [str(bin_dir)], version, b"{}") == first
    FileVersionCache(inner, str(answers)).execute("ptp", [str(bin_dir)], {"CNI_COMMAND": "DEL"}, b"{}")
    assert inner.calls == ["VERSION", "DEL"]
    other_request = FileVersionCache(inner, str(answers)).execute("ptp", [str(bin_dir)], version, b'{"x":1}')
    assert other_request != first and inner.calls == ["VERSION", "DEL", "VERSION"]
    assert len(os.listdir(answers)) == 2
    plugin(bin_dir, "#!/bin/sh\n# upgraded\n")
    assert FileVersionCache(inner, str(answers)).execute("ptp", [str(bin_dir)], version, b"{}") != first
    assert inner.calls == ["VERSION", "DEL", "VERSION", "VERSION"]
    # The replaced binary's answer to the same request is gone; the other request's stays.
    assert len(os.listdir(answers)) == 2


def test_thin_mode_without_a_writable_cni_dir_asks_every_time(tmp_path):
    plugin(tmp_path, "#!/bin/sh\n")
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    inner = Counting()
    for _ in range(2):
        cache = FileVersionCache(inner, str(blocked / "versions"))
        assert cache.execute("ptp", [str(tmp_path)], {"CNI_COMMAND": "VERSION"}, b"{}")
    assert inner.calls == ["VERSION", "VERSION"]
