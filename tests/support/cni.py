"""CNI fixtures: a plugin bin dir, network namespaces, the two-rail fake node and plugin runners.

Fixtures: ``cni_bin_dir`` and ``cnitool`` (session), ``netns`` (factory), ``fake_node`` (two-rail,
per test), ``cni_data_dir`` (per test), ``whereabouts`` (session). Helpers: :func:`run_cni`,
:func:`run_cnitool`; the bin dir and the topology themselves are the bed's
(testbed/nodecni.py, testbed/fakenode.py).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.fakenode import FakeNode, load_two_rail
from testbed.netlinks import host_link
from testbed.nodecni import WHEREABOUTS_CRDS, make_cni_bin_dir, ptp_host_local
from testbed.sriov_topology import VfRecord
from testbed.tools import ToolSet

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cni_bin_dir(tmp_path_factory: pytest.TempPathFactory, tool_dirs: ToolSet) -> Path:
    """Go plugins (those built) plus ``sriov``, ``recorder`` and ``faulty``; use as CNI_PATH."""
    return make_cni_bin_dir(tmp_path_factory.mktemp("cni-bin"), tool_dirs)


@pytest.fixture(scope="session")
def cnitool(tool_dirs: ToolSet) -> Path:
    """The real cnitool binary (skips, naming the reason, when it is not built)."""
    return tool_dirs.binary("cnitool", "cnitool")


@pytest.fixture
def cni_data_dir(tmp_path: Path) -> Path:
    """A private sriov plugin data dir (cache, allocations, locks) for one test."""
    path = tmp_path / "sriov-data"
    path.mkdir()
    return path


@pytest.fixture
def netns() -> Iterator[Callable[[], str]]:
    """Factory: each call creates a fresh ``ip netns`` and returns its path; all deleted after."""
    created: list[str] = []

    def make() -> str:
        name = f"h4t-{secrets.token_hex(4)}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        created.append(name)
        return f"/run/netns/{name}"

    yield make
    for name in created:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


@pytest.fixture
def fake_node(tmp_path: Path) -> Iterator[FakeNode]:
    """The two-rail fake node (spec 14.2), up for one test and torn down after."""
    node = FakeNode.up(load_two_rail(), tmp_path / "sys")
    try:
        yield node
    finally:
        node.down()


def cluster_network(tmp_path: Path) -> dict[str, Any]:
    """The cluster network (`podnet`): ptp with host-local IPAM under `tmp_path/ipam`, then tuning."""
    return {
        "cniVersion": "1.0.0",
        "name": "podnet",
        "plugins": [
            ptp_host_local("10.77.0.0/24", tmp_path / "ipam"),
            {
                "type": "tuning",
                "capabilities": {"mac": True},
                "sysctl": {"net.ipv4.conf.all.log_martians": "1"},
            },
        ],
    }


def shim_net_dir(tmp_path: Path, delegates: list[dict[str, Any]], version: str = "1.1.0") -> Path:
    """A net.d holding one conflist, `shimnet`: the shim with `delegates` inline, as cnitool reads it."""
    net_dir = tmp_path / "net.d"
    net_dir.mkdir(exist_ok=True)
    conf = {
        "cniVersion": version,
        "name": "shimnet",
        "plugins": [
            {
                "type": "cni-shim",
                "capabilities": {"mac": True},
                "cniDir": str(tmp_path / "cache"),
                "binDir": "",
                "confDir": str(tmp_path / "confdir"),
                "delegates": delegates,
            }
        ],
    }
    (net_dir / "10-shim.conflist").write_text(json.dumps(conf))
    return net_dir


def host_local_allocations(ipam: Path, network: str) -> dict[str, str]:
    """host-local's reservations for `network` under its data dir: IP -> the container ID holding it."""
    d = ipam / network
    if not d.exists():
        return {}
    return {
        f.name: f.read_text().splitlines()[0]
        for f in d.iterdir()
        if f.name[0].isdigit() and not f.name.startswith("last_reserved_ip")
    }


def assert_vf_home(vf: VfRecord) -> None:
    """The VF is back in the host netns under its original name and MAC."""
    link = host_link(vf.netdev)
    assert link is not None, f"{vf.netdev} is not back in the host netns"
    assert link["address"] == vf.mac, f"{vf.netdev} came back with MAC {link['address']}, not {vf.mac}"


@dataclass(frozen=True)
class CniRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout) if self.stdout.strip() else None


def run_cni(
    plugin: str,
    command: str,
    conf: Mapping[str, Any] | bytes,
    *,
    bin_dir: Path,
    container_id: str = "",
    netns: str = "",
    ifname: str = "",
    cni_args: str = "",
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> CniRun:
    """Execute one plugin from ``bin_dir`` the way a runtime does (CNI_* env + config on stdin)."""
    full_env = {
        **os.environ,
        **(env or {}),
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container_id,
        "CNI_NETNS": netns,
        "CNI_IFNAME": ifname,
        "CNI_ARGS": cni_args,
        "CNI_PATH": str(bin_dir),
    }
    stdin = conf if isinstance(conf, bytes) else json.dumps(conf).encode()
    proc = subprocess.run(
        [str(bin_dir / plugin)], input=stdin, env=full_env, capture_output=True, timeout=timeout, check=False
    )
    return CniRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def run_cnitool(
    cnitool: Path,
    args: list[str],
    *,
    net_dir: Path,
    bin_dir: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> CniRun:
    """Run cnitool (``add|del|check <net> <netns path>``) against the configs in ``net_dir``."""
    full_env = {**os.environ, **(env or {}), "NETCONFPATH": str(net_dir), "CNI_PATH": str(bin_dir)}
    proc = subprocess.run(
        [str(cnitool), *args], env=full_env, capture_output=True, timeout=timeout, check=False
    )
    return CniRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


@dataclass(frozen=True)
class Whereabouts:
    """Real whereabouts wired to the test bed: CRDs installed, flat config file written."""

    kubeconfig: Path
    config_file: Path
    namespace: str = "kube-system"

    def ipam(self, network_name: str, cidr: str, **extra: Any) -> dict[str, Any]:
        """An ``ipam`` block for one rail; ``network_name`` keeps runs from sharing IPPools."""
        return {
            "type": "whereabouts",
            "range": cidr,
            "network_name": network_name,
            "configuration_path": str(self.config_file),
            "kubernetes": {"kubeconfig": str(self.kubeconfig)},
            **extra,
        }

    def pool_name(self, network_name: str, cidr: str) -> str:
        return f"{network_name}-{cidr.replace(':', '-').replace('/', '-')}"

    def allocations(self, api_client: Any, network_name: str, cidr: str) -> dict[str, Any]:
        """The pool's allocations on the API server; none when the pool does not exist."""
        from kubernetes import client  # noqa: PLC0415 - keep the Kubernetes client out of unit runs
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        from testbed.apiobjects import as_object  # noqa: PLC0415

        api = client.CustomObjectsApi(api_client)
        try:
            pool = api.get_namespaced_custom_object(
                "whereabouts.cni.cncf.io",
                "v1alpha1",
                self.namespace,
                "ippools",
                self.pool_name(network_name, cidr),
            )
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        return as_object(pool)["spec"].get("allocations") or {}


@pytest.fixture(scope="session")
def whereabouts(testbed: Any, tool_dirs: ToolSet, tmp_path_factory: pytest.TempPathFactory) -> Whereabouts:
    """Install whereabouts' CRDs on the bed (idempotent) and point whereabouts at its kubeconfig."""
    from kubernetes import client  # noqa: PLC0415 - keep the Kubernetes client out of unit runs

    from testbed.waiting import wait_for  # noqa: PLC0415

    crd_dir = tool_dirs.require("whereabouts") / "crds"
    objects = [yaml.safe_load((crd_dir / name).read_text()) for name in WHEREABOUTS_CRDS]
    testbed.apply(objects)
    ext = client.ApiextensionsV1Api(testbed.api_client)

    def established() -> bool:
        for obj in objects:
            status = ext.read_custom_resource_definition(obj["metadata"]["name"]).status
            conditions = (status.conditions if status else None) or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    wait_for(established, 30.0, what="whereabouts CRDs to be Established")
    config = tmp_path_factory.mktemp("whereabouts") / "whereabouts.conf"
    config.write_text(
        json.dumps({"datastore": "kubernetes", "kubernetes": {"kubeconfig": str(testbed.kubeconfig)}})
    )
    return Whereabouts(Path(testbed.kubeconfig), config)
