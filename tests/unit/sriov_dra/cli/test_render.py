import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sriov_dra.cli import cli

CONFIG = '{"cniVersion":"1.0.0","plugins":[{"type":"sriov","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}},{"type":"tuning","mtu":9000}]}'
YAML_NAD = f"""apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: rail-a-net
  annotations:
    k8s.v1.cni.cncf.io/resourceName: intel.com/sriov
spec:
  config: '{CONFIG}'
"""
EXPECTED = (
    '{"cniVersion":"1.0.0","plugins":[{"type":"sriov","ipam":{"type":"host-local","subnet":"10.1.0.0/24"},'
    '"deviceID":"0000:03:00.1"},{"type":"tuning","mtu":9000}],"name":"rail-a-net"}'
)


@pytest.fixture
def nad_file(tmp_path):
    path = tmp_path / "nad.yaml"
    path.write_text(YAML_NAD)
    return path


def run(*args):
    return CliRunner().invoke(cli, ["render", *map(str, args)])


def test_text_output_prints_exact_bytes_digest_and_name(nad_file):
    result = run("--nad", nad_file, "--pci", "0000:03:00.1")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == EXPECTED
    assert lines[1] == "configSHA256: " + hashlib.sha256(EXPECTED.encode()).hexdigest()
    assert lines[2] == "cniName: rail-a-net"


def test_json_output_from_a_json_manifest(tmp_path):
    path = tmp_path / "nad.json"
    path.write_text(json.dumps({"metadata": {"name": "rail-a-net"}, "spec": {"config": CONFIG}}))
    result = run("--nad", path, "--pci", "0000:03:00.1", "--pod-namespace", "ai", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["config"] == EXPECTED
    assert out["configSHA256"] == hashlib.sha256(EXPECTED.encode()).hexdigest()
    assert (out["cniName"], out["pluginIndex"], out["pluginType"], out["podNamespace"]) == (
        "rail-a-net",
        0,
        "sriov",
        "ai",
    )


def test_typed_error_and_nonzero_exit(tmp_path):
    path = tmp_path / "nad.yaml"
    path.write_text(YAML_NAD.replace('"type":"tuning"', '"type":"macvlan"'))
    result = run("--nad", path, "--pci", "0000:03:00.1", "--pod-namespace", "ai")
    assert result.exit_code == 1
    assert "UnsupportedCNIConfig" in result.output and "ai/rail-a-net" in result.output
    assert "Traceback" not in result.output


def test_json_error_output(nad_file):
    result = run("--nad", nad_file, "--pci", "pci:0000:03:00.1", "-o", "json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["reason"] == "InvalidPCIAddress"


@pytest.mark.parametrize("content", ["[1, 2]", "a: [", None])
def test_unreadable_manifest(tmp_path, content):
    path = tmp_path / "nad.yaml"
    if content is not None:
        path.write_text(content)
    result = run("--nad", path, "--pci", "0000:03:00.1")
    assert result.exit_code == 1
    assert "InvalidManifest" in result.output


def test_installed_console_script(nad_file):
    exe = Path(sys.executable).with_name("sriov-dra")
    if not exe.exists():
        pytest.skip("sriov-dra console script is not installed next to this interpreter")
    done = subprocess.run(
        [str(exe), "render", "--nad", str(nad_file), "--pci", "0000:03:00.1"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == EXPECTED
