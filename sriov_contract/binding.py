"""The binding annotation a generated shadow NAD carries: who it belongs to and what it renders.

The driver writes it once at Create; the CNI shim reads it on ADD and compares it with the Pod it
already fetched and the exact spec.config bytes. It is an ownership guard, not a signature.
"""

from __future__ import annotations

from sriov_contract import reasons
from sriov_contract.document import (
    check_fields,
    check_version,
    compact,
    get_object,
    get_str,
    load_object,
    require_version,
)
from sriov_contract.errors import ContractError
from sriov_contract.identity import BindingIdentity, config_sha256
from sriov_contract.keys import BINDING_ANNOTATION, PROTOCOL_VERSION
from sriov_contract.names import (
    validate_dns_label,
    validate_dns_subdomain,
    validate_interface,
    validate_pci_address,
    validate_resource_version,
    validate_sha256,
    validate_uid,
)
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Final

    from sriov_contract.document import JSONObject

FIELDS: Final = (
    "version",
    "attachmentID",
    "podUID",
    "claimUID",
    "nodeName",
    "nodeUID",
    "source",
    "pciAddress",
    "interface",
    "configSHA256",
)
SOURCE_FIELDS: Final = ("namespace", "name", "uid", "resourceVersion")
_WHAT: Final = f"annotation {BINDING_ANNOTATION}"


class SourceRef(TypedTuple):
    """The source template the shadow was rendered from; diagnostic provenance only."""

    namespace: str
    name: str
    uid: str
    resource_version: str

    def __post_init__(self) -> None:
        validate_dns_label(self.namespace, "source.namespace")
        validate_dns_subdomain(self.name, "source.name")
        validate_uid(self.uid, "source.uid")
        validate_resource_version(self.resource_version, "source.resourceVersion")

    def to_dict(self) -> JSONObject:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
        }


class Binding(TypedTuple):
    version: int
    attachment_id: str
    pod_uid: str
    claim_uid: str
    node_name: str
    node_uid: str
    source: SourceRef
    pci_address: str
    interface: str
    config_sha256: str

    def __post_init__(self) -> None:
        require_version(self.version, _WHAT, "version", PROTOCOL_VERSION)
        validate_sha256(self.attachment_id, "attachmentID")
        validate_uid(self.pod_uid, "podUID")
        validate_uid(self.claim_uid, "claimUID")
        validate_dns_subdomain(self.node_name, "nodeName")
        validate_uid(self.node_uid, "nodeUID")
        validate_pci_address(self.pci_address, "pciAddress")
        validate_interface(self.interface, "interface")
        validate_sha256(self.config_sha256, "configSHA256")

    def to_dict(self) -> JSONObject:
        return {
            "version": self.version,
            "attachmentID": self.attachment_id,
            "podUID": self.pod_uid,
            "claimUID": self.claim_uid,
            "nodeName": self.node_name,
            "nodeUID": self.node_uid,
            "source": self.source.to_dict(),
            "pciAddress": self.pci_address,
            "interface": self.interface,
            "configSHA256": self.config_sha256,
        }

    def to_json(self) -> str:
        return compact(self.to_dict())

    def verify_identity(self, identity: BindingIdentity) -> None:
        """The full-identity check that catches a truncated shadow-name collision on lookup."""
        expected = (identity.attachment_id(), identity.pod_uid, identity.claim_uid, identity.node_uid)
        actual = (self.attachment_id, self.pod_uid, self.claim_uid, self.node_uid)
        if expected != actual:
            raise ContractError(
                reasons.IDENTITY_MISMATCH,
                f"binding for attachment {self.attachment_id} does not describe allocation "
                f"{identity.driver}/{identity.pool}/{identity.device} of claim {identity.claim_uid}; "
                "the shadow belongs to another binding: do not adopt or edit it",
                attachment_id=self.attachment_id,
            )

    def verify_config(self, config: bytes) -> None:
        """The rendered configuration must be byte-identical to what the driver froze."""
        actual = config_sha256(config)
        if actual != self.config_sha256:
            raise ContractError(
                reasons.CONFIG_HASH_MISMATCH,
                f"shadow config of attachment {self.attachment_id} hashes to {actual}, binding "
                f"records {self.config_sha256}; the shadow was edited: recreate the workload",
                attachment_id=self.attachment_id,
            )


def _source(obj: JSONObject) -> tuple[str, ...]:
    what = f"{_WHAT} field 'source'"
    check_fields(obj, what, SOURCE_FIELDS)
    return tuple(get_str(obj, key, what) for key in SOURCE_FIELDS)


def parse_binding(text: str) -> Binding:
    """Strictly decode a binding annotation value; raises ContractError with a stable reason."""
    obj = load_object(text, _WHAT)
    check_version(obj, _WHAT, "version", PROTOCOL_VERSION)
    check_fields(obj, _WHAT, FIELDS)
    # Every field's type is checked before any value, so the source object's types are checked in
    # its position while its values are checked first (innermost first), as the README orders it.
    strings: dict[str, str] = {}
    source: tuple[str, ...] = ()
    for key in FIELDS[1:]:
        if key == "source":
            source = _source(get_object(obj, key, _WHAT))
        else:
            strings[key] = get_str(obj, key, _WHAT)
    return Binding(
        version=PROTOCOL_VERSION,
        attachment_id=strings["attachmentID"],
        pod_uid=strings["podUID"],
        claim_uid=strings["claimUID"],
        node_name=strings["nodeName"],
        node_uid=strings["nodeUID"],
        source=SourceRef(*source),
        pci_address=strings["pciAddress"],
        interface=strings["interface"],
        config_sha256=strings["configSHA256"],
    )
