"""Hostile CNI stdin, environment, Pod annotations and NAD configs through the cni-shim.

In-process, the real protocol shell (``cni_shim.main.run``) and core run with fake adapters: an
in-memory API whose Pod and NADs carry hostile documents, a scripted plugin executor, and a cache
store pinned to a temporary directory whatever ``cniDir`` the hostile config names. Every
invocation must end in exit status 0 or 1, and a failure must be CNI error JSON with a spec code
that a typed error produced: the catch-all "failed unexpectedly" path means an untyped exception
escaped, which is a bug. A few runs of the installed executable check the same from outside.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from cni_shim import main
from cni_shim.handler import Services
from cni_shim.node.cache import FileCacheStore
from sriov_contract.keys import NETWORKS_ANNOTATION
from tests.fakes.cni_ports import FakeExecutor, FakeKube
from tests.fuzz.hostile import emit, hostile_text, mutated_text
from tests.fuzz.test_fuzz_annotations import NETWORK_SEEDS
from tests.fuzz.test_fuzz_driver import CONFIG_SEEDS
from tests.support.cni_shim import ShimHarness

SHIM = Path(sys.executable).with_name("cni-shim")
NS = "ai-workloads"
CATCH_ALL = "failed unexpectedly"


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz-cni-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def harness(workdir: Path) -> ShimHarness:
    return ShimHarness(workdir)


def _conf_seeds(root: Path) -> list[Any]:
    base = {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "multus",
        "kubeconfig": "/fake",
        "cniDir": str(root / "cni"),
        "confDir": str(root / "confdir"),
        "binDir": str(root / "bin"),
        "delegates": [
            {"cniVersion": "1.0.0", "name": "cluster", "type": "ptp", "ipam": {"type": "host-local"}}
        ],
    }
    return [
        base,
        {**base, "cniVersion": "0.3.1", "namespaceIsolation": True, "globalNamespaces": "default"},
        {
            "cniVersion": "1.1.0",
            "name": "multus-cni-network",
            "type": "multus",
            "kubeconfig": "/fake",
            "cniDir": str(root / "cni"),
            "clusterNetwork": "cluster",
            "defaultNetworks": ["rail-a-net"],
            "runtimeConfig": {"portMappings": [{"hostPort": 1, "containerPort": 2}]},
            "prevResult": {"cniVersion": "1.1.0", "interfaces": [], "ips": []},
        },
    ]


ENV_DEFAULTS = {
    "CNI_CONTAINERID": "c1",
    "CNI_NETNS": "/run/netns/t1",
    "CNI_IFNAME": "eth0",
    "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID=uid-1",
    "CNI_PATH": "/opt/cni/bin",
}
HOSTILE_ENV = st.sampled_from(
    ["", "..", "a" * 300, "x;y=z", "K8S_POD_NAME=", "a=b=c;;", "\x7f", "é"]
) | st.text(max_size=30)


@st.composite
def env_of(draw: st.DrawFn) -> dict[str, str]:
    commands = ["ADD", "ADD", "ADD", "DEL", "DEL", "CHECK", "GC", "STATUS", "VERSION", ""]
    env = {
        "CNI_COMMAND": draw(st.sampled_from(commands))
        if draw(st.integers(0, 9))
        else draw(st.text(max_size=8))
    }
    hostile = draw(st.integers(0, 3)) == 0
    for key, value in ENV_DEFAULTS.items():
        choice = draw(st.integers(0, 9)) if hostile else 9
        if choice == 0:
            continue
        env[key] = draw(HOSTILE_ENV) if choice == 1 else value
    # The environment cannot carry NUL bytes; execve would refuse them before we ever ran.
    return {k: v.replace("\x00", "") for k, v in env.items()}


def _services(harness: ShimHarness, env: dict[str, str]) -> Services:
    store_dir = harness.tmp / "store"
    # Pinned: a hostile cniDir must not make the fuzzer write or delete anywhere on this host.
    return harness.services(env)._replace(store_for=lambda _dir: FileCacheStore(str(store_dir)))


def assert_cni_outcome(status: int, out: str, err: str) -> None:
    assert status in (0, 1), (status, out, err)
    assert "Traceback" not in err
    if status == 1:
        doc = json.loads(out)
        assert isinstance(doc["code"], int) and doc["code"] > 0
        assert isinstance(doc["msg"], str) and doc["msg"]
        assert CATCH_ALL not in doc["msg"], doc["msg"]
    elif out:
        json.loads(out)


@given(data=st.data())
def test_fuzz_cni_stdin_env_and_api_objects(harness: ShimHarness, data: st.DataObject) -> None:
    shutil.rmtree(harness.tmp / "store", ignore_errors=True)
    (harness.tmp / "store").mkdir()
    kube = harness.kube = FakeKube()
    harness.executor = FakeExecutor()
    annotations = {}
    if data.draw(st.integers(0, 3)):
        annotations[NETWORKS_ANNOTATION] = data.draw(hostile_text(NETWORK_SEEDS), label="networks")
    kube.add_pod(NS, "pod1", "uid-1", annotations)
    kube.add_nad(NS, "rail-a-net", data.draw(hostile_text(CONFIG_SEEDS), label="nad config"))
    kube.add_nad("kube-system", "cluster", '{"cniVersion":"1.1.0","name":"cluster","type":"ptp"}')
    env = data.draw(env_of(), label="env")
    seeds = _conf_seeds(harness.tmp)
    # Often a valid config, so the hostile Pod annotation and NAD config get read at all.
    text = st.sampled_from(seeds).map(emit) | mutated_text(seeds) | hostile_text(seeds)
    stdin = data.draw(
        text.map(lambda t: t.encode("utf-8", "surrogatepass")) | st.binary(max_size=64), label="stdin"
    )
    status, out, err = main.run(env, lambda: stdin, lambda env: _services(harness, env))
    assert_cni_outcome(status, out, err)
    code = json.loads(out)["code"] if status else 0
    event(
        f"{env['CNI_COMMAND'] if env['CNI_COMMAND'] in ('ADD', 'DEL', 'CHECK') else 'other'} exit {status} code {code}"
    )
    event(f"read NAD: {any(kind == 'nad' for kind, _, _ in kube.reads)}")


SUBPROCESS_CASES = [
    ("ADD", b"{not json"),
    ("ADD", b"\xff\xfe\x00"),
    ("ADD", b"[" * 100_000 + b"]" * 100_000),
    (
        "DEL",
        b'{"cniVersion":"1.0.0","name":"n","type":"multus","delegates":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ),
    ("ADD", b'{"cniVersion":"9.9.9","name":"n","delegates":[{"type":"x"}]}'),
    ("CHECK", b'{"cniVersion":' + b"1" * 5000 + b',"name":"n"}'),
    ("BOGUS", b'{"cniVersion":"1.0.0","name":"n","delegates":[{"type":"x"}]}'),
    (
        "ADD",
        emit({"cniVersion": "1.0.0", "name": "\ud800", "delegates": [{"type": "x"}]}).encode(
            "utf-8", "surrogatepass"
        ),
    ),
]


@pytest.mark.parametrize(
    ("command", "stdin"), SUBPROCESS_CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(SUBPROCESS_CASES)]
)
def test_fuzz_cni_executable_answers_error_json(workdir: Path, command: str, stdin: bytes) -> None:
    if not SHIM.exists():
        pytest.skip(f"{SHIM} is not installed; run 'make venv'")
    env = {**ENV_DEFAULTS, "CNI_COMMAND": command, "PATH": os.environ.get("PATH", "")}
    proc = subprocess.run([str(SHIM)], input=stdin, env=env, capture_output=True, timeout=60)
    assert proc.returncode == 1, proc
    assert_cni_outcome(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert proc.stderr == b""
