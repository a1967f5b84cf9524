"""Start-up survives a port taken between picking it and binding it (another bed starting)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed import controlplane, processes
from testbed.tools import ToolSet

pytestmark = pytest.mark.integration


def test_port_clash_is_retried_with_fresh_ports(
    tool_dirs: ToolSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]

        def ports() -> Iterator[int]:
            yield taken  # the first bed's etcd client port
            while True:
                yield processes.free_port()

        picks = ports()
        monkeypatch.setattr(controlplane, "free_port", lambda: next(picks))
        bed = controlplane.start(tools=tool_dirs, run_id="clash", root=tmp_path / "runs")
        try:
            assert bed.healthy()
            assert bed.state.ports["etcd"] != taken
            # The failed first attempt left nothing behind: one run, no kept logs.
            assert [p.name for p in (tmp_path / "runs").iterdir()] == ["clash"]
        finally:
            bed.stop()
