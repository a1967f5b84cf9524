"""Flags and environment as upstream; auto-attach only with MULTUS, refused at start-up."""

import subprocess
import sys

import pytest

from sriov_dra.app.config import Config, ConfigError


def test_defaults_match_upstream() -> None:
    cfg = Config(node_name="n")
    assert (cfg.namespace, str(cfg.cdi_root), str(cfg.registrar_dir), str(cfg.plugins_dir)) == (
        "dra-driver-sriov",
        "/var/run/cdi",
        "/var/lib/kubelet/plugins_registry",
        "/var/lib/kubelet/plugins",
    )
    assert cfg.configuration_mode == "STANDALONE" and cfg.healthcheck_port == -1


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"node_name": ""}, "MissingNodeName"),
        ({"node_name": "n", "configuration_mode": "NRI"}, "InvalidConfigurationMode"),
        ({"node_name": "n", "multus_auto_attach": True}, "AutoAttachRequiresMultus"),
        ({"node_name": "n", "healthcheck_port": 70000}, "InvalidHealthcheckPort"),
    ],
)
def test_invalid_combinations(kwargs, reason) -> None:
    with pytest.raises(ConfigError) as err:
        Config(**kwargs)
    assert err.value.reason == reason


def test_multus_mode_accepts_auto_attach_and_is_case_insensitive() -> None:
    assert (
        Config(node_name="n", configuration_mode="multus", multus_auto_attach=True).configuration_mode
        == "MULTUS"
    )


def test_start_up_rejects_auto_attach_from_environment() -> None:
    env = {
        "NODE_NAME": "n",
        "CONFIGURATION_MODE": "STANDALONE",
        "MULTUS_AUTO_ATTACH": "true",
        "PATH": "/usr/bin",
    }
    out = subprocess.run(
        [sys.executable, "-c", "from sriov_dra.main import main; main()"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "AutoAttachRequiresMultus" in out.stderr and "Traceback" not in out.stderr
