"""The opaque VfConfig parameters and their class-then-claim layering for one allocation result.

Configs come from the ResourceClaim's `status.allocation.devices.config[]` as stored by the
scheduler (never refetched from a mutable DeviceClass). Matching follows Kubernetes'
resourceclaim.ConfigForResult: an entry applies when its `requests` is empty, names the result's
request exactly, or names the parent of a `request/subrequest` result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from sriov_dra.core.errors import INVALID_VF_CONFIG, DriverCoreError, fail

API_VERSION: Final = "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1"
KIND: Final = "VfConfig"
SOURCES: Final = ("FromClass", "FromClaim")
_STRING_FIELDS: Final = ("driver", "ifName", "netAttachDefName", "netAttachDefNamespace")
_KNOWN_FIELDS: Final = frozenset({"apiVersion", "kind", "addVhostMount", *_STRING_FIELDS})


@dataclass(frozen=True, slots=True)
class VfConfig:
    """Upstream's VfConfig fields; empty strings mean "not set"."""

    driver: str = ""
    add_vhost_mount: bool = False
    if_name: str = ""
    net_attach_def_name: str = ""
    net_attach_def_namespace: str = ""

    def overridden_by(self, later: VfConfig) -> VfConfig:
        """Apply a later (higher-precedence) config on top of this one.

        A later NAD name replaces name and namespace together, so class A@infra plus claim
        B@<omitted> is B in the Pod namespace, never B@infra. A later namespace alone moves only
        the namespace of the current name.
        """
        merged = replace(
            self,
            driver=later.driver or self.driver,
            add_vhost_mount=self.add_vhost_mount or later.add_vhost_mount,
            if_name=later.if_name or self.if_name,
        )
        if later.net_attach_def_name:
            return replace(
                merged,
                net_attach_def_name=later.net_attach_def_name,
                net_attach_def_namespace=later.net_attach_def_namespace,
            )
        if later.net_attach_def_namespace:
            return replace(merged, net_attach_def_namespace=later.net_attach_def_namespace)
        return merged


def decode_vf_config(parameters: object, where: str) -> VfConfig:
    """Strictly decode opaque parameters: apiVersion and kind required, unknown fields refused."""
    if not isinstance(parameters, Mapping):
        raise _invalid(where, "parameters must be an object")
    unknown = sorted(set(parameters) - _KNOWN_FIELDS)
    if unknown:
        raise _invalid(where, f"unknown field(s) {unknown}")
    if parameters.get("apiVersion") != API_VERSION or parameters.get("kind") != KIND:
        raise _invalid(where, f"apiVersion must be {API_VERSION} and kind {KIND}")
    values: dict[str, str] = {}
    for key in _STRING_FIELDS:
        value = parameters.get(key, "")
        if not isinstance(value, str):
            raise _invalid(where, f"{key} must be a string")
        values[key] = value
    vhost = parameters.get("addVhostMount", False)
    if not isinstance(vhost, bool):
        raise _invalid(where, "addVhostMount must be a boolean")
    return VfConfig(
        driver=values["driver"],
        add_vhost_mount=vhost,
        if_name=values["ifName"],
        net_attach_def_name=values["netAttachDefName"],
        net_attach_def_namespace=values["netAttachDefNamespace"],
    )


def _invalid(where: str, why: str) -> DriverCoreError:
    return fail(INVALID_VF_CONFIG, f"VfConfig in {where}: {why}; fix the opaque parameters", where=where)


def config_applies(config: Mapping[str, Any], request: str) -> bool:
    """resourceclaim.ConfigForResult's test for one config entry and one result's request."""
    if config.get("opaque") is None:
        return False
    requests = config.get("requests") or []
    return not requests or request in requests or request.split("/", 1)[0] in requests


def effective_vf_config(
    allocation_configs: Sequence[Mapping[str, Any]], request: str, driver_name: str
) -> VfConfig:
    """Layer every matching config of this driver for `request`: class first, then claim, list order kept."""
    result = VfConfig()
    for source in SOURCES:
        for index, config in enumerate(allocation_configs):
            if config.get("source") not in SOURCES:
                raise _invalid(f"allocation config {index}", f"unknown source {config.get('source')!r}")
            if config.get("source") != source or not config_applies(config, request):
                continue
            opaque = config["opaque"]
            if opaque.get("driver") != driver_name:
                continue
            decoded = decode_vf_config(opaque.get("parameters"), f"allocation config {index} ({source})")
            result = result.overridden_by(decoded)
    return result
