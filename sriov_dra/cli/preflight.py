"""`sriov-dra preflight`: is this node ready for managed networks (spec 18.1: verify the CNI
side's live reads and the driver's rights on every node before turning auto-attach on)?

Checks the CNI side's effective daemon configuration (live reads on ADD), that the shim answers
its identity and VERSION queries, the plugin binaries, the persistent cache directories, the
CRDs, and — by SelfSubjectAccessReview under the credentials given — every right the driver
uses. Prints each check; exits 1 with one line per failure on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import click

from sriov_contract.errors import ReasonedError
from sriov_dra.cli.common import (
    DEFAULT_CHECKPOINT,
    api_client,
    emit_json,
    kube_options,
    output_option,
    reasoned,
    table,
)
from sriov_dra.model import (
    ATTR_PCI_ADDRESS,
    DRA_GROUP,
    DRA_VERSION,
    DRIVER_NAME,
    NAD_GROUP,
    POLICY_GROUP,
    POLICY_VERSION,
)

SHIM: Final = "cni-shim"
DRIVER_NAMESPACE: Final = "dra-driver-sriov"


@dataclass(frozen=True)
class Right:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.verb} {self.resource}{sub}.{self.group or 'core'}{where}"


def _rights(verbs: str, group: str, resource: str, subresource: str = "", namespace: str = "") -> list[Right]:
    return [Right(v, group, resource, subresource, namespace) for v in verbs.split()]


# Every call the driver makes (deploy/base/driver-rbac.yaml grants exactly these).
DRIVER_RIGHTS: Final = (
    _rights("get list patch", "", "pods")
    + _rights("get list watch create patch delete", NAD_GROUP, "network-attachment-definitions")
    + _rights("create patch", "", "events")
    + _rights("get list watch", "", "nodes")
    + _rights("get list watch create update patch delete", DRA_GROUP, "resourceslices")
    + _rights("get list watch", DRA_GROUP, "resourceclaims")
    + _rights("update patch", DRA_GROUP, "resourceclaims", "status")
    + _rights("associated-node:update associated-node:patch", DRA_GROUP, "resourceclaims", "driver")
    + _rights("get", DRA_GROUP, "deviceclasses")
    + _rights("get list watch", POLICY_GROUP, "sriovresourcepolicies", namespace=DRIVER_NAMESPACE)
    + _rights("get list watch", POLICY_GROUP, "deviceattributes", namespace=DRIVER_NAMESPACE)
)
REQUIRED_RESOURCES: Final = (
    (NAD_GROUP, "v1", "network-attachment-definitions"),
    (POLICY_GROUP, POLICY_VERSION, "sriovresourcepolicies"),
    (POLICY_GROUP, POLICY_VERSION, "deviceattributes"),
    (DRA_GROUP, DRA_VERSION, "resourceclaims"),
    (DRA_GROUP, DRA_VERSION, "resourceslices"),
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def check_daemon_config(path: Path) -> tuple[list[Check], dict[str, Any]]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [Check("cni daemon-config", False, f"cannot read {path}: {exc}")], {}
    if not isinstance(config, dict):
        return [Check("cni daemon-config", False, f"{path} is not a JSON object")], {}
    live = config.get("liveNetworkConfigOnAdd") is True
    detail = (
        "liveNetworkConfigOnAdd is true"
        if live
        else "set liveNetworkConfigOnAdd: true (ADD must read the Pod live)"
    )
    return [Check("cni live reads on ADD", live, f"{path}: {detail}")], config


def check_shim(bin_dir: Path) -> Check:
    shim = bin_dir / SHIM
    if not os.access(shim, os.X_OK):
        return Check("cni-shim identity", False, f"{shim} is missing or not executable")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNI_")}
    try:
        about = subprocess.run([str(shim)], env=env, capture_output=True, text=True, timeout=10, check=False)
        version = subprocess.run(
            [str(shim)],
            env={**env, "CNI_COMMAND": "VERSION"},
            input="{}",
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        supported = json.loads(version.stdout).get("supportedVersions")
    except (OSError, subprocess.SubprocessError, ValueError, AttributeError) as exc:
        return Check("cni-shim identity", False, f"{shim} did not answer VERSION: {exc}")
    first = (about.stderr or about.stdout).strip().splitlines()[:1]
    if not first or not first[0].startswith(f"{SHIM}:") or not isinstance(supported, list):
        return Check("cni-shim identity", False, f"{shim} is not cni-shim (it answered {first[:1]})")
    return Check("cni-shim identity", True, f"{first[0]}; CNI {', '.join(map(str, supported))}")


def check_plugins(bin_dir: Path, plugins: Sequence[str]) -> list[Check]:
    return [
        Check(
            f"plugin {p}",
            os.access(bin_dir / p, os.X_OK),
            f"{bin_dir / p}" + ("" if os.access(bin_dir / p, os.X_OK) else " is missing or not executable"),
        )
        for p in plugins
    ]


def check_dirs(dirs: Sequence[Path]) -> list[Check]:
    out = []
    for d in dirs:
        ok = d.is_dir() and os.access(d, os.W_OK)
        how = "mount point" if ok and os.path.ismount(d) else "present"
        out.append(
            Check(f"cache dir {d}", ok, how if ok else "missing or not writable; mount the host's directory")
        )
    return out


# Where device plugins leave each device's info (the SR-IOV network device plugin among them).
DEVICE_PLUGIN_DEVINFO_DIR: Final = Path("/var/run/k8s.cni.cncf.io/devinfo/dp")


def device_plugin_vfs(devinfo_dir: Path) -> dict[str, str]:
    """PCI address -> the device-info file a device plugin wrote for it (its advertised VFs)."""
    out: dict[str, str] = {}
    for path in sorted(devinfo_dir.glob("*-device.json")) if devinfo_dir.is_dir() else []:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        pci = doc.get("pci") if isinstance(doc, dict) else None
        address = pci.get("pci-address") if isinstance(pci, dict) else None
        if isinstance(address, str) and address:
            out[address] = path.name
    return out


def published_vfs(slices: Sequence[Mapping[str, Any]]) -> set[str]:
    """The PCI addresses of the devices the driver's ResourceSlices publish."""
    short = ATTR_PCI_ADDRESS.rsplit("/", 1)[1]
    out = set()
    for sl in slices:
        for dev in (sl.get("spec") or {}).get("devices") or []:
            attrs = dev.get("attributes") or {}
            value = (attrs.get(ATTR_PCI_ADDRESS) or attrs.get(short) or {}).get("string")
            if isinstance(value, str):
                out.add(value)
    return out


def check_one_provider(legacy: Mapping[str, str], published: set[str]) -> Check:
    """Spec 18.1: one provider per VF inventory. A VF a device plugin advertises (the legacy
    resourceName path) must be excluded from the driver's policy, or both hand it out."""
    both = sorted(set(legacy) & published)
    detail = (
        f"{len(legacy)} device-plugin VF(s), none published by the driver"
        if not both
        else "published by the driver and advertised by a device plugin: "
        + ", ".join(f"{vf} ({legacy[vf]})" for vf in both)
        + "; exclude them from the driver's policy (or the device plugin's pool)"
    )
    return Check("one provider per VF", not both, detail)


class Access(Protocol):
    def served_resources(self, group_version: str) -> set[str]: ...

    def may(self, attributes: Mapping[str, str]) -> bool: ...


def check_crds(access: Access) -> list[Check]:
    served: dict[str, set[str]] = {}
    out = []
    for group, version, plural in REQUIRED_RESOURCES:
        gv = f"{group}/{version}"
        if gv not in served:
            served[gv] = access.served_resources(gv)
        ok = plural in served[gv]
        out.append(
            Check(f"API {plural}.{gv}", ok, "served" if ok else "not served: install its CRD (deploy/)")
        )
    return out


def check_rights(access: Access, rights: Sequence[Right]) -> list[Check]:
    out = []
    for right in rights:
        attrs = {"verb": right.verb, "group": right.group, "resource": right.resource}
        if right.subresource:
            attrs["subresource"] = right.subresource
        if right.namespace:
            attrs["namespace"] = right.namespace
        allowed = access.may(attrs)
        out.append(
            Check(
                f"may {right}",
                allowed,
                "allowed" if allowed else "denied: apply deploy/base/driver-rbac.yaml",
            )
        )
    return out


@click.command("preflight")
@kube_options
@click.option(
    "--cni-daemon-config",
    type=click.Path(path_type=Path),
    default=Path("/etc/cni-shim/daemon-config.json"),
    show_default=True,
)
@click.option(
    "--cni-bin-dir", type=click.Path(path_type=Path), default=Path("/opt/cni/bin"), show_default=True
)
@click.option(
    "--plugin",
    "plugins",
    multiple=True,
    default=("sriov",),
    show_default=True,
    help="required CNI plugin (repeat)",
)
@click.option(
    "--cache-dir",
    "cache_dirs",
    multiple=True,
    type=click.Path(path_type=Path),
    default=(Path("/var/lib/cni/sriov"),),
    show_default=True,
)
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path),
    default=DEFAULT_CHECKPOINT,
    show_default=True,
    help="the driver checkpoint; its directory must persist",
)
@click.option(
    "--node",
    default="",
    help="this node's name: check that no VF a device plugin advertises here is also the driver's",
)
@click.option(
    "--device-plugin-devinfo-dir",
    type=click.Path(path_type=Path),
    default=DEVICE_PLUGIN_DEVINFO_DIR,
    show_default=True,
)
@click.option(
    "--skip-rights", is_flag=True, help="do not check the driver's rights (credentials are not the driver's)"
)
@output_option
@reasoned
def preflight(
    *,
    kubeconfig: str | None,
    cni_daemon_config: Path,
    cni_bin_dir: Path,
    plugins: tuple[str, ...],
    cache_dirs: tuple[Path, ...],
    checkpoint: Path,
    node: str,
    device_plugin_devinfo_dir: Path,
    skip_rights: bool,
    output: str,
) -> None:
    """Check a node before enabling managed networks; run with the driver's credentials."""
    checks, config = check_daemon_config(cni_daemon_config)
    checks.append(check_shim(cni_bin_dir))
    checks += check_plugins(cni_bin_dir, plugins)
    dirs = [*cache_dirs, checkpoint.parent]
    if config.get("cniDir"):
        dirs.insert(0, Path(str(config["cniDir"])))
    checks += check_dirs(dirs)
    try:
        from sriov_dra.kube.resources import KubeAccess  # noqa: PLC0415 - keeps --help instant

        access = KubeAccess(api_client(kubeconfig))
        checks += check_crds(access)
        if not skip_rights:
            checks += check_rights(access, DRIVER_RIGHTS)
        if node:
            from kubernetes import client  # noqa: PLC0415 - keeps --help instant

            try:
                found: dict[str, Any] = client.CustomObjectsApi(  # type: ignore[assignment]
                    api_client(kubeconfig)
                ).list_cluster_custom_object(
                    DRA_GROUP,
                    DRA_VERSION,
                    "resourceslices",
                    field_selector=f"spec.nodeName={node},spec.driver={DRIVER_NAME}",
                )
            except client.exceptions.ApiException as exc:
                checks.append(
                    Check("one provider per VF", False, f"cannot list ResourceSlices: {exc.status}")
                )
            else:
                legacy = device_plugin_vfs(device_plugin_devinfo_dir)
                checks.append(check_one_provider(legacy, published_vfs(found.get("items") or [])))
    except ReasonedError as exc:
        checks.append(Check("cluster access", False, f"{exc.reason}: {exc.message}"))
    failed = [c for c in checks if not c.ok]
    if output == "json":
        emit_json(
            {"ok": not failed, "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks]}
        )
    else:
        click.echo(
            table(
                ("CHECK", "RESULT", "DETAIL"),
                [(c.name, "PASS" if c.ok else "FAIL", c.detail) for c in checks],
            ),
            nl=False,
        )
    for c in failed:
        click.echo(f"FAIL {c.name}: {c.detail}", err=True)
    if failed:
        raise SystemExit(1)
