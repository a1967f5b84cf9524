"""sriov-cni NetConf: the same keys, defaults and validation messages, as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_DATA_DIR = "/var/lib/cni/sriov"
DATA_DIR_ENV = "SRIOV_CNI_DATA_DIR"
SYSFS_ENV = "SRIOV_SYSFS_ROOT"
_LINK_STATES = ("auto", "enable", "disable")
_VLAN_PROTOS = ("802.1q", "802.1ad")


class ConfError(Exception):
    """A NetConf problem; the text is what sriov-cni prints after ``LoadConf():``."""


@dataclass(frozen=True)
class NetConf:
    name: str
    cni_version: str
    device_id: str
    ipam_type: str
    vlan: int | None = None
    vlan_qos: int | None = None
    vlan_proto: str | None = None
    mac: str = ""
    trust: str = ""
    spoofchk: str = ""
    link_state: str = ""
    min_tx_rate: int | None = None
    max_tx_rate: int | None = None
    log_file: str = ""
    log_level: str = "info"
    data_dir: str = DEFAULT_DATA_DIR
    raw: Mapping[str, Any] = field(default_factory=dict)


def _opt_int(conf: Mapping[str, Any], key: str) -> int | None:
    value = conf.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfError(f"{key} must be an integer, got {value!r}")
    return value


def _validate_vlan(vlan: int | None, qos: int | None, proto: str | None) -> None:
    if vlan is None:
        if qos is not None or proto is not None:
            raise ConfError("vlan id must be configured to set vlan QoS or vlan protocol")
        return
    if not 0 <= vlan <= 4094:
        raise ConfError(f"vlan id {vlan} invalid: value must be in the range 0-4094")
    if qos is not None and not 0 <= qos <= 7:
        raise ConfError(f"vlan QoS PCP {qos} invalid: value must be in the range 0-7")
    if qos and vlan == 0:
        raise ConfError("non-zero vlan id must be configured to set vlan QoS to a non-zero value")
    if proto is not None and proto not in _VLAN_PROTOS:
        raise ConfError(f'vlan Proto {proto} invalid: value must be "802.1Q" or "802.1ad"')
    if proto == "802.1ad" and vlan == 0:
        raise ConfError("non-zero vlan id must be configured to set vlan proto 802.1ad")


def parse_netconf(conf: Mapping[str, Any], environ: Mapping[str, str]) -> NetConf:
    """Validate a sriov NetConf as sriov-cni's LoadConf does, minus the sysfs look-up."""
    device_id = str(conf.get("deviceID") or "")
    if not device_id:
        raise ConfError("VF pci addr is required")
    vlan, qos = _opt_int(conf, "vlan"), _opt_int(conf, "vlanQoS")
    proto = conf.get("vlanProto")
    proto = str(proto).lower() if proto is not None else None
    _validate_vlan(vlan, qos, proto)
    link_state = str(conf.get("link_state") or "")
    if link_state and link_state not in _LINK_STATES:
        raise ConfError(f"invalid link_state value: {link_state}")
    min_rate, max_rate = _opt_int(conf, "min_tx_rate"), _opt_int(conf, "max_tx_rate")
    for key, rate in (("min_tx_rate", min_rate), ("max_tx_rate", max_rate)):
        if rate is not None and rate < 0:
            raise ConfError(f"{key} {rate} invalid: must not be negative")
    ipam = conf.get("ipam") or {}
    return NetConf(
        name=str(conf.get("name", "")),
        cni_version=str(conf.get("cniVersion") or "0.1.0"),
        device_id=device_id,
        ipam_type=str(ipam.get("type") or "") if isinstance(ipam, Mapping) else "",
        vlan=vlan,
        vlan_qos=qos,
        vlan_proto=proto,
        mac=str(conf.get("mac") or "").lower(),
        trust=str(conf.get("trust") or ""),
        spoofchk=str(conf.get("spoofchk") or ""),
        link_state=link_state,
        min_tx_rate=min_rate,
        max_tx_rate=max_rate,
        log_file=str(conf.get("logFile") or ""),
        log_level=str(conf.get("logLevel") or "info"),
        data_dir=data_dir_of(conf, environ),
        raw=conf,
    )


def effective_mac(netconf: NetConf, cni_args: Mapping[str, str]) -> str:
    """MAC precedence of sriov-cni: config ``mac`` < CNI_ARGS ``MAC`` < ``runtimeConfig.mac``."""
    mac = netconf.mac
    if cni_args.get("MAC"):
        mac = cni_args["MAC"]
    runtime = netconf.raw.get("runtimeConfig") or {}
    if isinstance(runtime, Mapping) and runtime.get("mac"):
        mac = str(runtime["mac"])
    return mac.lower()


def check_cni_args(cni_args: Mapping[str, str]) -> None:
    """sriov-cni accepts only IgnoreUnknown and MAC in CNI_ARGS unless IgnoreUnknown is true."""
    if cni_args.get("IgnoreUnknown", "").lower() in ("1", "true"):
        return
    unknown = sorted(k for k in cni_args if k not in ("IgnoreUnknown", "MAC"))
    if unknown:
        raise ConfError(f"ARGS: unknown args {unknown}")


def sysfs_root(environ: Mapping[str, str]) -> str:
    return environ.get(SYSFS_ENV) or "/sys"


def data_dir_of(conf: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    return str(conf.get("dataDir") or environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)
