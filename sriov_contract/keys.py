"""Annotation, label and finalizer names of the version-1 contract, and label-value validation.

Node names never become label values: a valid node name may be up to 253 characters, beyond the
63-character label limit, so shadows carry the node UID label and the node name lives only in the
binding annotation.
"""

from __future__ import annotations

from sriov_contract import reasons
from sriov_contract.errors import ContractError

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Final

DOMAIN: Final = "sriovnetwork.k8snetworkplumbingwg.io"
PROTOCOL_VERSION: Final = 1

BINDING_ANNOTATION: Final = f"{DOMAIN}/binding"
REGISTRY_ANNOTATION: Final = f"{DOMAIN}/managed-networks"
PROTECTION_FINALIZER: Final = f"{DOMAIN}/attachment-protection"
DEVICE_INFO_ANNOTATION: Final = f"{DOMAIN}/device-info"

MANAGED_BY_LABEL: Final = f"{DOMAIN}/managed-by"
POD_UID_LABEL: Final = f"{DOMAIN}/pod-uid"
CLAIM_UID_LABEL: Final = f"{DOMAIN}/claim-uid"
NODE_UID_LABEL: Final = f"{DOMAIN}/node-uid"
MANAGED_BY_VALUE: Final = "sriov-dra-driver"

RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"
NETWORKS_ANNOTATION: Final = "k8s.v1.cni.cncf.io/networks"
NETWORK_STATUS_ANNOTATION: Final = "k8s.v1.cni.cncf.io/network-status"

SHADOW_NAME_PREFIX: Final = "dra-sriov-"

LABEL_VALUE_MAX: Final = 63
# Kubernetes' (([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?, spelled out: `re` would be the heaviest
# import of the CNI executable's DEL, which loads this module.
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_LABEL_CHARS = _ALNUM | frozenset("-_.")


def label_value(value: str) -> str:
    """Return `value` unchanged if Kubernetes accepts it as a non-empty label value.

    Nothing is rewritten: a silently shortened or re-cased value would stop matching the object
    it identifies, so an unusable value is an error for the caller to route elsewhere.
    """
    if not (
        0 < len(value) <= LABEL_VALUE_MAX
        and value[0] in _ALNUM
        and value[-1] in _ALNUM
        and _LABEL_CHARS.issuperset(value)
    ):
        raise ContractError(
            reasons.INVALID_LABEL_VALUE,
            f"{value!r} cannot be a Kubernetes label value (1-{LABEL_VALUE_MAX} characters, "
            "alphanumeric at both ends, '-', '_' or '.' inside); label by a UID instead",
            value=value,
        )
    return value


def shadow_labels(pod_uid: str, claim_uid: str, node_uid: str) -> dict[str, str]:
    """The complete label set of a generated shadow NAD, built from scratch, never copied."""
    return {
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
        POD_UID_LABEL: label_value(pod_uid),
        CLAIM_UID_LABEL: label_value(claim_uid),
        NODE_UID_LABEL: label_value(node_uid),
    }
