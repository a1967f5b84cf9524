"""The source NAD a SriovNetwork stands for, by upstream's rules (sriov-network-operator's
RenderNetAttDef and its CNI template), so NADs this operator writes are the ones upstream would.

One module for both controllers: the network controller writes what `desired_nad` returns and the
node-policy controller checks the live NAD against `desired_config` (spec 12.2.3: the two must
not drift). Reproduced on purpose, including upstream's whitespace stripping of the IPAM text
(it removes spaces inside JSON strings too; NADs upstream wrote must compare equal).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from sriov_operator.core.keys import GROUP, NAD_GROUP, NAD_RESOURCE_NAME_ANNOTATION, OWNER_REF_ANNOTATION
from sriov_operator.reasons import NAD_INVALID, fail

CNI_VERSION: Final = "1.0.0"
_ON_OFF: Final = ("on", "off")


def _meta(network: Mapping[str, Any]) -> Mapping[str, Any]:
    return network.get("metadata") or {}


def _spec(network: Mapping[str, Any]) -> Mapping[str, Any]:
    return network.get("spec") or {}


def describe(network: Mapping[str, Any]) -> str:
    md = _meta(network)
    return f"SriovNetwork {md.get('namespace')}/{md.get('name')}"


def target_of(network: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of the NAD: spec.networkNamespace when set, else the CR's namespace."""
    md = _meta(network)
    return str(_spec(network).get("networkNamespace") or md.get("namespace") or ""), str(md.get("name", ""))


def owner_marker(network: Mapping[str, Any]) -> str:
    """Upstream's owner-ref annotation value: <Kind>.<group>/<namespace>/<name> (no UID)."""
    md = _meta(network)
    return f"SriovNetwork.{GROUP}/{md.get('namespace')}/{md.get('name')}"


def namespace_problem(network: Mapping[str, Any], operator_namespace: str) -> str | None:
    """Upstream's rule: only a SriovNetwork in the operator namespace may redirect its NAD."""
    md = _meta(network)
    if _spec(network).get("networkNamespace") and md.get("namespace") != operator_namespace:
        return (
            f"{describe(network)}: spec.networkNamespace cannot be set when the resource is not in "
            f"the operator namespace ({operator_namespace}); remove it or move the SriovNetwork there"
        )
    return None


def _sriov_members(spec: Mapping[str, Any]) -> list[str]:
    out = ['"type":"sriov"', f'"vlan":{int(spec.get("vlan") or 0)}']
    if spec.get("spoofChk") in _ON_OFF:
        out.append(f'"spoofchk":{json.dumps(spec["spoofChk"])}')
    if spec.get("trust") in _ON_OFF:
        out.append(f'"trust":{json.dumps(spec["trust"])}')
    out.append(f'"vlanQoS":{int(spec.get("vlanQoS") or 0)}')
    if spec.get("vlanProto"):
        out.append(f'"vlanProto":{json.dumps(spec["vlanProto"])}')
    for field, key in (("minTxRate", "min_tx_rate"), ("maxTxRate", "max_tx_rate")):
        rate = spec.get(field)
        if isinstance(rate, int) and rate >= 0:
            out.append(f'"{key}":{rate}')
    if spec.get("capabilities"):
        out.append(f'"capabilities":{spec["capabilities"]}')
    if spec.get("linkState"):
        out.append(f'"link_state":{json.dumps(spec["linkState"])}')
    if spec.get("logLevel"):
        out.append(f'"logLevel":{json.dumps(spec["logLevel"])}')
    if spec.get("logFile"):
        out.append(f'"logFile":{json.dumps(spec["logFile"])}')
    ipam = "".join(str(spec.get("ipam") or "").split())
    out.append(f'"ipam":{ipam or "{}"}')
    return out


def desired_config(network: Mapping[str, Any]) -> str:
    """spec.config of the NAD: upstream's key order, re-indented with 4 spaces as upstream does.

    Raises NetworkAttachmentDefinitionInvalid when the raw ipam/capabilities/metaPlugins text does
    not make valid JSON.
    """
    spec = _spec(network)
    head = [f'"cniVersion":"{CNI_VERSION}"', f'"name":{json.dumps(str(_meta(network).get("name", "")))}']
    sriov = ",".join(_sriov_members(spec))
    meta_plugins = spec.get("metaPlugins")
    if meta_plugins:
        text = "{" + ",".join(head) + ',"plugins":[{' + sriov + "}," + str(meta_plugins) + "]}"
    else:
        text = "{" + ",".join([*head, sriov]) + "}"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(
            NAD_INVALID,
            f"{describe(network)}: the rendered CNI configuration is not valid JSON ({exc.msg}); fix "
            "spec.ipam, spec.capabilities or spec.metaPlugins",
        ) from None
    return json.dumps(parsed, indent=4, ensure_ascii=False)


def resource_name_annotation(network: Mapping[str, Any], prefix: str) -> str:
    name = str(_spec(network).get("resourceName") or "")
    return f"{prefix}/{name}" if prefix else name


def desired_nad(network: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The complete desired source NAD (metadata the network controller owns, and spec)."""
    namespace, name = target_of(network)
    md = _meta(network)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "annotations": {
            NAD_RESOURCE_NAME_ANNOTATION: resource_name_annotation(network, prefix),
            OWNER_REF_ANNOTATION: owner_marker(network),
        },
    }
    if namespace == md.get("namespace"):
        # Same namespace only: an ownerReference cannot cross namespaces. Not a controller
        # reference, as upstream, so other tooling may still own the NAD's lifecycle.
        meta["ownerReferences"] = [
            {"apiVersion": f"{GROUP}/v1", "kind": "SriovNetwork", "name": name, "uid": md.get("uid", "")}
        ]
    return {
        "apiVersion": f"{NAD_GROUP}/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": meta,
        "spec": {"config": desired_config(network)},
    }


def config_matches(nad: Mapping[str, Any], expected_config: str) -> bool:
    """Whether the NAD's spec.config is the expected JSON (formatting aside)."""
    try:
        return bool(
            json.loads(str((nad.get("spec") or {}).get("config") or "")) == json.loads(expected_config)
        )
    except ValueError:
        return False
