"""`sriov-dra uninstall-check` on a node without cluster credentials: only its checkpoint is read."""

from __future__ import annotations

from click.testing import CliRunner

from sriov_dra.cli import cli
from tests.fakes.driver_env import NS, Env, vf_config

VF1 = "0000-17-00-1"


def test_on_a_node_without_credentials_only_the_checkpoint_is_read(env: Env, tmp_path) -> None:
    runner = CliRunner()
    empty = runner.invoke(
        cli, ["uninstall-check", "--node-only", "--checkpoint", str(tmp_path / "none.json")]
    )
    assert empty.exit_code == 0, empty.output
    assert empty.output.startswith("nothing blocks uninstall")
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    blocked = runner.invoke(
        cli, ["uninstall-check", "--node-only", "--checkpoint", str(env.tmp / "checkpoint.json")]
    )
    assert blocked.exit_code == 2
    assert f"checkpoint  {NS}" in blocked.output and ref.uid in blocked.output
    assert "sriov-dra: UninstallBlocked: 1 checkpoint(s) remain" in blocked.output
