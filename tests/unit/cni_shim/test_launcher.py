"""The fast launcher works under any file name and answers like the console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cni_shim import launcher

CONSOLE = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "cni-shim"


def _run(binary: Path, command: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": os.environ.get("PATH", ""), "CNI_COMMAND": command}
    return subprocess.run([str(binary)], input=stdin, env=env, capture_output=True, check=False)


def test_launcher_installed_as_multus_matches_the_console_script(tmp_path):
    fast = launcher.install(tmp_path / "multus")
    assert fast.read_text().splitlines()[0].endswith(" -S")
    for binary in (fast, CONSOLE):
        version = _run(binary, "VERSION")
        assert version.returncode == 0
        assert json.loads(version.stdout)["supportedVersions"][-1] == "1.1.0"
        bad = _run(binary, "ADD", b"{")
        assert bad.returncode == 1
        assert json.loads(bad.stdout)["code"] == 4  # env is checked before stdin is read
        about = _run(binary, "")
        assert about.returncode == 0 and b"meta-plugin" in about.stderr


def test_fast_launcher_still_reads_a_yaml_kubeconfig(tmp_path):
    fast = launcher.install(tmp_path / "cni-shim")
    kc = tmp_path / "kc.yaml"
    kc.write_text(
        "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
    )
    conf = {
        "cniVersion": "1.0.0",
        "name": "n",
        "kubeconfig": str(kc),
        "delegates": [{"type": "x", "name": "d"}],
    }
    env = {
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": "c1",
        "CNI_NETNS": "/run/netns/none",
        "CNI_IFNAME": "eth0",
        "CNI_PATH": str(tmp_path),
        "CNI_ARGS": "K8S_POD_NAMESPACE=a;K8S_POD_NAME=b;IgnoreUnknown=1",
    }
    out = subprocess.run(
        [str(fast)], input=json.dumps(conf).encode(), env=env, capture_output=True, check=False
    )
    doc = json.loads(out.stdout)
    # the YAML parsed; the failure is the unreachable server, reported as try-again-later
    assert doc["code"] == 11, doc
    assert "127.0.0.1:1" in doc["msg"]


# Each of these alone costs a thin invocation milliseconds (dataclasses pulls in inspect, ast, dis).
HEAVY = ("typing", "dataclasses", "inspect", "email", "http", "subprocess", "yaml", "urllib3")


def test_a_thin_add_loads_no_heavy_module():
    """A fresh -S interpreter loads everything a thin ADD can: bench.thick_compare's list (the
    annotation parser and delegate builder included) and the managed-shadow guard with the
    contract's parsers. None of the heavy modules may come along."""
    from bench.thick_compare import THIN_MODULES  # noqa: PLC0415 - the bench's profile measures this list

    probe = (
        f"import sys; sys.path.insert(0, {str(Path(launcher.__file__).resolve().parents[1])!r}); "
        f"import {', '.join(THIN_MODULES)}, cni_shim.core.guard, cni_shim.node.devices; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert {"cni_shim.core.delegates", "sriov_contract.networks", "cni_shim.kube.thin_client"} <= set(
        THIN_MODULES
    )


# What a thin invocation's path still may not load, beyond HEAVY. A DEL (and the forwarding shim)
# needs neither the API client nor a regular expression; an ADD's client drives _ssl and _socket
# itself, so it loads neither their wrappers (with enum, re, base64) nor json, urllib or ipaddress.
DEL_PATH = (
    "cni_shim.main",
    "cni_shim.thick.forward",
    "cni_shim.handler",
    "cni_shim.handler.delete",
    "cni_shim.app.thin",
)
NOT_ON_DEL = (
    "json",
    "re",
    "enum",
    "base64",
    "contextlib",
    "functools",
    "urllib",
    "signal",
    "ipaddress",
    "socket",
    "ssl",
)
NOT_ON_ADD = (
    "json",
    "urllib",
    "ipaddress",
    "contextlib",
    "threading",
    "ssl",
    "socket",
    "selectors",
    "enum",
    "re",
    "base64",
)
# A forwarded request that succeeds: the shim's few modules, not even the error classes or `os`.
FORWARD_PATH = ("cni_shim.main", "cni_shim.core.versions", "cni_shim.thick.forward")
NOT_ON_FORWARD = (*NOT_ON_DEL, "os", "__future__", "cni_shim.errors", "sriov_contract.errors")


def _loaded(modules: tuple[str, ...], names: tuple[str, ...]) -> list[str]:
    probe = (
        f"import sys; sys.path.insert(0, {str(Path(launcher.__file__).resolve().parents[1])!r}); "
        f"import {', '.join(modules)}; "
        f"print(sorted(m for m in sys.modules if m in {names!r} or m.split('.')[0] in {names!r}))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().strip("[]").replace("'", "").split(", ") if m]


def test_a_thin_del_loads_no_json_regex_or_enum_module():
    assert _loaded(DEL_PATH, NOT_ON_DEL) == []


def test_a_forwarded_request_loads_neither_os_nor_the_error_classes():
    assert _loaded(FORWARD_PATH, NOT_ON_FORWARD) == []


def test_a_thin_add_loads_none_of_the_modules_it_spells_out():
    from bench.thick_compare import THIN_MODULES  # noqa: PLC0415 - the bench's profile measures this list

    add_path = (
        *THIN_MODULES,
        "cni_shim.core.guard",
        "cni_shim.kube.eventwriter",
        "cni_shim.node.devices",  # an ADD whose networks name a device asks the node
    )
    assert _loaded(add_path, NOT_ON_ADD) == []


def test_a_thin_api_request_to_an_ascii_host_never_loads_the_idna_codec():
    """getaddrinfo (and ssl) encode a str host with `idna`, which loads unicodedata and stringprep."""
    probe = (
        f"import sys; sys.path.insert(0, {str(Path(launcher.__file__).resolve().parents[1])!r})\n"
        "from cni_shim.kube.thin_client import KubeClient\n"
        "from cni_shim.kube.kubeconfig import Connection\n"
        "try:\n    KubeClient(Connection(server='http://localhost:1')).request('GET', '/')\n"
        "except Exception as exc:\n    print(type(exc).__name__)\n"
        "print('encodings.idna' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["ApiError", "False"]


def test_grpc_is_loaded_only_when_a_resource_name_nad_meets_a_pod_resources_socket(tmp_path):
    """The resourceName path's modules ride on every ADD; gRPC and the protobuf runtime come only
    with a List call (the checkpoint fallback needs neither)."""
    from bench.thick_compare import THIN_MODULES  # noqa: PLC0415 - the bench's profile measures this list

    checkpoint = tmp_path / "checkpoint"
    checkpoint.write_text('{"Data": {"PodDeviceEntries": []}}')
    probe = (
        f"import sys; sys.path.insert(0, {str(Path(launcher.__file__).resolve().parents[1])!r}); "
        f"import {', '.join(THIN_MODULES)}, cni_shim.handler.resourcelookup, cni_shim.node.podresources; "
        "from cni_shim.node.podresources import KubeletPodResources as K; "
        f"K({str(tmp_path / 'absent.sock')!r}, {str(checkpoint)!r}).allocations('ns', 'p', 'u'); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'grpc', 'google'}))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_stdlib_only_shim_answers_from_the_checkpoint_even_beside_a_pod_resources_socket(tmp_path):
    """The host bundle has no gRPC (-S here, as there): the kubelet's checkpoint gives the same
    device-plugin allocations."""
    socket = tmp_path / "kubelet.sock"
    socket.touch()
    checkpoint = tmp_path / "checkpoint"
    entry = {"PodUID": "u", "ContainerName": "c", "ResourceName": "r", "DeviceIDs": {"0": ["0000:03:00.4"]}}
    checkpoint.write_text(json.dumps({"Data": {"PodDeviceEntries": [entry]}}))
    probe = (
        f"import sys; sys.path.insert(0, {str(Path(launcher.__file__).resolve().parents[1])!r}); "
        "from cni_shim.node.podresources import KubeletPodResources as K; "
        f"print(K({str(socket)!r}, {str(checkpoint)!r}).allocations('ns', 'p', 'u'))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[('r', ['0000:03:00.4'])]"
