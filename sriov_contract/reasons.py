"""The contract's reasons: every stable reason code sriov_contract raises, each defined once here.

Both sides raise some of them too (an interface or PCI address that breaks the contract's syntax,
an invalid networks annotation) and import them from here. MEANINGS gives each reason's meaning
and the operator's action; docs/reasons.md is generated from it (scripts/gen_reasons.py). Values
are wire values: fixtures/README.md and the Go reader match on them, so they never change.
"""

from __future__ import annotations

# Spelled out instead of imported: the CNI executable loads this module, and `typing` alone costs
# milliseconds on every start.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Final

# Decoding a contract document (fixtures/README.md section 6, in check order).
MALFORMED_JSON: Final = "MalformedJSON"
INVALID_ENCODING: Final = "InvalidEncoding"
DUPLICATE_KEY: Final = "DuplicateKey"
WRONG_TYPE: Final = "WrongType"
MISSING_FIELD: Final = "MissingField"
UNSUPPORTED_VERSION: Final = "UnsupportedVersion"
UNKNOWN_FIELD: Final = "UnknownField"
# Value syntax (section 5).
INVALID_UID: Final = "InvalidUID"
INVALID_SHA256: Final = "InvalidSHA256"
INVALID_NAME: Final = "InvalidName"
INVALID_PCI_ADDRESS: Final = "InvalidPCIAddress"
INVALID_RESOURCE_VERSION: Final = "InvalidResourceVersion"
INVALID_SHADOW_NAME: Final = "InvalidShadowName"
INVALID_INTERFACE_NAME: Final = "InvalidInterfaceName"
INVALID_IDENTITY_FIELD: Final = "InvalidIdentityField"
INVALID_LABEL_VALUE: Final = "InvalidLabelValue"
# Registry cross-entry checks (section 4.2) and checks against other data.
SHADOW_NAME_MISMATCH: Final = "ShadowNameMismatch"
DUPLICATE_ATTACHMENT_ID: Final = "DuplicateAttachmentID"
DUPLICATE_SELECTION: Final = "DuplicateSelection"
DUPLICATE_INTERFACE: Final = "DuplicateInterface"
MIXED_NAMESPACES: Final = "MixedNamespaces"
IDENTITY_MISMATCH: Final = "IdentityMismatch"
CONFIG_HASH_MISMATCH: Final = "ConfigHashMismatch"
# The Multus networks annotation.
INVALID_NETWORKS_ANNOTATION: Final = "InvalidNetworksAnnotation"
# The conformance checker.
MISSING_FIXTURES: Final = "MissingFixtures"
NO_VECTORS: Final = "NoVectors"
INVALID_SCHEMA: Final = "InvalidSchema"

# reason -> (what it means, what the operator does)
MEANINGS: Final[dict[str, tuple[str, str]]] = {
    MALFORMED_JSON: (
        "A contract document is not exactly one JSON value (or nests deeper than 32 levels).",
        "The annotation was edited or truncated: recreate the workload so the driver writes it again.",
    ),
    INVALID_ENCODING: (
        "A contract document holds an unpaired UTF-16 surrogate escape or invalid UTF-8.",
        "Write valid Unicode text; recreate the workload if the driver wrote it.",
    ),
    DUPLICATE_KEY: (
        "A contract document repeats an object key.",
        "Remove the duplicate; readers would disagree on which copy wins.",
    ),
    WRONG_TYPE: (
        "A contract document or one of its fields has the wrong JSON type.",
        "Fix or recreate the annotation; the field table in fixtures/README.md gives each type.",
    ),
    MISSING_FIELD: (
        "A contract document lacks a required field.",
        "Recreate the workload so the driver writes the document again.",
    ),
    UNSUPPORTED_VERSION: (
        "A contract document has a version this build does not understand.",
        "Upgrade the reader (driver or CNI shim) or drain the newer writer.",
    ),
    UNKNOWN_FIELD: (
        "A contract document has a field version 1 does not define.",
        "Remove the field, or run a reader that understands the writer's version.",
    ),
    INVALID_UID: (
        "A UID is not a lowercase 36-character UUID.",
        "Fix the value; UIDs come from the API server and are never typed by hand.",
    ),
    INVALID_SHA256: (
        "A digest is not 64 lowercase hexadecimal characters.",
        "Recreate the workload so the driver writes the digest again.",
    ),
    INVALID_NAME: (
        "A namespace, node or NAD name is not an RFC 1123 label or subdomain, or an RDMA device name is malformed.",
        "Use a valid Kubernetes name.",
    ),
    INVALID_PCI_ADDRESS: (
        "A PCI address is not a lowercase domain:bus:device.function.",
        "Fix the address in the config or annotation (e.g. 0000:3b:02.1, no pci: prefix).",
    ),
    INVALID_RESOURCE_VERSION: (
        "A resourceVersion is not 1-128 visible ASCII characters.",
        "Recreate the workload so the driver writes the binding again.",
    ),
    INVALID_SHADOW_NAME: (
        "A generated selection names something that is not a driver shadow name.",
        "Do not edit generated selections; recreate the Pod.",
    ),
    INVALID_INTERFACE_NAME: (
        "An interface name is not a valid Linux interface name (1-15 bytes, no '/', ':' or spaces).",
        "Choose another interface name in the claim config or networks annotation.",
    ),
    INVALID_IDENTITY_FIELD: (
        "A binding identity field is empty, too long or not valid Unicode.",
        "Fix the named field (driver, pool or device names come from the ResourceSlice).",
    ),
    INVALID_LABEL_VALUE: (
        "A value cannot be a Kubernetes label value.",
        "Label by a UID instead; report it if the driver produced it.",
    ),
    SHADOW_NAME_MISMATCH: (
        "A Pod registry entry's shadow name does not derive from its attachment ID.",
        "The registry was edited: restore it or recreate the Pod.",
    ),
    DUPLICATE_ATTACHMENT_ID: (
        "A Pod registry lists one attachment ID twice.",
        "Repair the Pod's registry annotation or recreate the Pod.",
    ),
    DUPLICATE_SELECTION: (
        "A Pod registry lists one shadow twice.",
        "Repair the Pod's registry annotation or recreate the Pod.",
    ),
    DUPLICATE_INTERFACE: (
        "A Pod registry lists one interface twice.",
        "Repair the Pod's registry annotation or recreate the Pod.",
    ),
    MIXED_NAMESPACES: (
        "A Pod registry names shadows in more than one namespace.",
        "Shadows live in the Pod namespace only: repair the registry or recreate the Pod.",
    ),
    IDENTITY_MISMATCH: (
        "A shadow's binding describes another allocation than the one it was looked up for.",
        "The shadow belongs to another binding: do not adopt or edit it; recreate the workload.",
    ),
    CONFIG_HASH_MISMATCH: (
        "A shadow's spec.config bytes do not hash to the binding's configSHA256.",
        "The shadow was edited: recreate the workload.",
    ),
    INVALID_NETWORKS_ANNOTATION: (
        "A Pod's k8s.v1.cni.cncf.io/networks annotation cannot be parsed the way Multus parses it.",
        "Fix or remove the named entry of the annotation.",
    ),
    MISSING_FIXTURES: (
        "The conformance checker was pointed at a directory without schema/ and v1/.",
        "Pass the fixtures directory of a checkout.",
    ),
    NO_VECTORS: (
        "The conformance checker found no vectors to run.",
        "Pass a fixtures directory that holds v1 vectors.",
    ),
    INVALID_SCHEMA: (
        "A fixtures JSON Schema is unreadable or not draft 2020-12.",
        "Restore the schema file from the checkout.",
    ),
}
