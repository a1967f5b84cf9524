"""The Pod network selection annotation `k8s.v1.cni.cncf.io/networks`, parsed as Multus parses it.

Both sides need the same reading: the driver merges its managed selections into the annotation
and the CNI shim executes it. Every element keeps its original JSON object (`raw`, with unknown
fields, key order and exact number text) next to the validated known fields, so a writer can
re-serialize entries it does not own without losing anything.

Standard library only: the CNI shim imports this on its hot path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sriov_contract.errors import ReasonedError
from sriov_contract.names import is_label_part
from sriov_contract.reasons import INVALID_NETWORKS_ANNOTATION
from sriov_lib import rawjson
from sriov_lib.rawjson import JsonObject, JsonValue, RawNumber
from sriov_lib.typedtuple import TypedTuple

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"

# Multus switches to JSON as soon as any of these characters appears anywhere in the value.
_JSON_MARKERS = frozenset('[{"')
# 0|[1-9][0-9]{0,2}, spelled out: `re` (with the `enum` it imports) would be the heaviest
# import of a thin ADD, which parses every selection.
_DIGITS = frozenset("0123456789")
_IFNAME_FORBIDDEN = frozenset(" \t\n\v\f\r/")
_IFNAMSIZ = 16
# Go's strings.TrimSpace set (unicode.IsSpace), which differs from str.strip() at \x1c-\x1f.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_INT64 = (-(2**63), 2**63 - 1)
_HEX_PAIR = "[0-9A-Fa-f]{2}"
_HEX_QUAD = "[0-9A-Fa-f]{4}"


class PortMapping(TypedTuple):
    host_port: int
    container_port: int
    protocol: str
    host_ip: str


class Bandwidth(TypedTuple):
    ingress_rate: int
    ingress_burst: int
    egress_rate: int
    egress_burst: int


class NetworkSelection(TypedTuple):
    """One validated selection; `raw` is the element exactly as written (synthesized for shorthand).

    Two selections are equal when their validated fields are: `raw` and `shorthand` only record
    how it was written.
    """

    name: str
    namespace: str
    interface: str | None
    raw: JsonObject
    shorthand: bool = False
    ips: tuple[str, ...] = ()
    mac: str | None = None
    infiniband_guid: str | None = None
    default_route: tuple[str, ...] = ()
    port_mappings: tuple[PortMapping, ...] = ()
    bandwidth: Bandwidth | None = None
    cni_args: JsonObject | None = None
    device_id: str | None = None

    def selection_tuple(self) -> tuple[str, str, str | None]:
        """The (namespace, name, interface) identity the driver uses to recognize its own entries."""
        return (self.namespace, self.name, self.interface)

    def _compared(self) -> tuple[object, ...]:
        return self[:3] + self[5:]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NetworkSelection):
            return NotImplemented
        return self._compared() == other._compared()

    def __ne__(self, other: object) -> bool:  # tuple's own would compare every field
        return not self == other

    def __hash__(self) -> int:
        return hash(self._compared())


# Multus's texts for the same failures (its parsePodNetworkAnnotation), carried in the error's
# `multus` detail so the CNI side can answer in Multus's wording; JSON-form failures that Go
# reports as a decode error get its JSON prefix and our explanation after it.
_MULTUS = "parsePodNetworkAnnotation: "
_MULTUS_JSON = _MULTUS + "failed to parse pod Network Attachment Selection Annotation JSON format: "
_MULTUS_NAME = _MULTUS + "parsePodNetworkObjectName: "


def _error(item: str, why: str, multus: str | None = None) -> ReasonedError:
    return ReasonedError(
        INVALID_NETWORKS_ANNOTATION,
        f"network selection {item!r} in annotation {NETWORKS_ANNOTATION} is invalid: {why}; "
        "fix or remove that entry",
        item=item,
        multus=_MULTUS_JSON + why if multus is None else multus,
    )


def parse_network_selections(text: str | None, default_namespace: str) -> list[NetworkSelection]:
    """Parse the annotation value; absent or empty means no selections."""
    if not text:
        return []
    if _JSON_MARKERS.intersection(text):
        return _parse_json(text, default_namespace)
    return [_parse_shorthand(item.strip(_GO_SPACE), default_namespace) for item in text.split(",")]


def selections_to_annotation(selections: Sequence[NetworkSelection]) -> str:
    """Serialize as the JSON list form, every element from its raw object."""
    return rawjson.dumps(list(s.raw for s in selections))


def _parse_shorthand(item: str, default_namespace: str) -> NetworkSelection:
    slash = item.split("/")
    if len(slash) > 2:
        raise _error(
            item,
            "more than one '/' (expected [<namespace>/]<name>[@<interface>])",
            _MULTUS_NAME + "Invalid network object (failed at '/')",
        )
    namespace = slash[0].strip(_GO_SPACE) if len(slash) == 2 else ""
    at = slash[-1].split("@")
    if len(at) > 2:
        raise _error(
            item,
            "more than one '@' (expected [<namespace>/]<name>[@<interface>])",
            _MULTUS_NAME + "Invalid network object (failed at '@')",
        )
    name = at[0].strip(_GO_SPACE)
    interface = at[1].strip(_GO_SPACE) if len(at) == 2 else ""
    for part in (namespace, name):
        if part and not is_label_part(part):
            raise _error(
                item,
                f"{part!r} must be lower case alphanumeric or '-', starting and ending alphanumeric",
                _MULTUS_NAME + "Failed to parse: one or more items did not match comma-delimited format "
                "(must consist of lower case alphanumeric characters). Must start and end with an "
                f"alphanumeric character), mismatch @ '{part}'",
            )
    if interface and (len(interface.encode()) >= _IFNAMSIZ or _IFNAME_FORBIDDEN.intersection(interface)):
        raise _error(
            item,
            f"interface name {interface!r} must be under 16 bytes without '/' or spaces",
            _MULTUS_NAME + "Failed to parse interface name: must be less than 15 chars and not contain "
            f"'/' or spaces. interface name '{interface}'",
        )
    raw = JsonObject(name=name)
    if namespace:
        raw["namespace"] = namespace
    if interface:
        raw["interface"] = interface
    return NetworkSelection(
        name=name,
        namespace=namespace or default_namespace,
        interface=interface or None,
        raw=raw,
        shorthand=True,
    )


def _parse_json(text: str, default_namespace: str) -> list[NetworkSelection]:
    try:
        value = rawjson.loads(text)
    except rawjson.RawJsonError as exc:
        raise _error(text, f"malformed JSON ({exc})") from exc
    if not isinstance(value, list):
        raise _error(text, "the JSON form must be a list of objects")
    return [_parse_element(element, default_namespace) for element in value]


# Go's decoder maps a key to a field by exact name first, otherwise case-insensitively.
_KNOWN_KEYS = (
    "name",
    "namespace",
    "ips",
    "mac",
    "infiniband-guid",
    "interface",
    "interfaceRequest",
    "portMappings",
    "bandwidth",
    "deviceID",
    "cni-args",
    "default-route",
)


def _fold_fields(obj: Mapping[str, JsonValue], keys: Sequence[str]) -> dict[str, JsonValue]:
    by_fold = {k.lower(): k for k in keys}
    fields: dict[str, JsonValue] = {}
    for key, value in obj.items():
        target = key if key in keys else by_fold.get(key.lower())
        # A JSON null leaves a Go field at its zero value, whichever spelling wrote it.
        if target is not None and value is not None:
            fields[target] = value
    return fields


def _parse_element(element: JsonValue, default_namespace: str) -> NetworkSelection:
    item = rawjson.dumps(element)
    if not isinstance(element, JsonObject):
        raise _error(item, "each list element must be a JSON object")
    f = _fold_fields(element, _KNOWN_KEYS)

    def string(key: str) -> str:
        return _as_str(f.get(key, ""), item, key)

    mac = string("mac")
    guid = string("infiniband-guid")
    if mac and not _is_go_mac(mac):
        raise _error(
            item,
            f"mac {mac!r} is not a valid hardware address",
            f"{_MULTUS}failed to mac: address {mac}: invalid MAC address",
        )
    if guid and not _is_go_mac(guid):
        raise _error(
            item,
            f"infiniband-guid {guid!r} is not a valid hardware address",
            f"{_MULTUS}failed to validate infiniband GUID: address {guid}: invalid MAC address",
        )
    ips = _str_list(f.get("ips"), item, "ips")
    for ip in ips:
        if not (_is_go_cidr(ip) if "/" in ip else _is_go_ip(ip)):
            raise _error(
                item,
                f"ips entry {ip!r} is not an IP address or CIDR",
                f'failed to parse CIDR "{ip}": invalid CIDR address: {ip}'
                if "/" in ip
                else f'failed to parse IP address "{ip}"',
            )
    routes = _str_list(f.get("default-route"), item, "default-route")
    for gw in routes:
        if gw and not _is_go_ip(gw):
            raise _error(
                item,
                f"default-route entry {gw!r} is not an IP address",
                f"{_MULTUS_JSON}invalid IP address: {gw}",
            )
    cni_args = f.get("cni-args")
    if cni_args is not None and not isinstance(cni_args, JsonObject):
        raise _error(item, "cni-args must be an object")
    return NetworkSelection(
        name=string("name"),
        namespace=string("namespace") or default_namespace,
        interface=string("interface") or string("interfaceRequest") or None,
        raw=element,
        ips=tuple(ips),
        mac=mac or None,
        infiniband_guid=guid or None,
        default_route=tuple(routes),
        port_mappings=tuple(
            _port_mapping(p, item) for p in _list(f.get("portMappings"), item, "portMappings")
        ),
        bandwidth=_bandwidth(f.get("bandwidth"), item),
        cni_args=cni_args,
        device_id=string("deviceID") or None,
    )


def _as_str(value: JsonValue, item: str, key: str) -> str:
    if not isinstance(value, str):
        raise _error(item, f"{key} must be a string")
    return value


def _list(value: JsonValue, item: str, key: str) -> list[JsonValue]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _error(item, f"{key} must be a list")
    return value


def _str_list(value: JsonValue, item: str, key: str) -> list[str]:
    return [_as_str(v, item, key) for v in _list(value, item, key)]


def _as_int(value: JsonValue, item: str, key: str) -> int:
    if value is None:
        return 0
    if not isinstance(value, RawNumber) or not value.is_integer():
        raise _error(item, f"{key} must be an integer")
    # Length first: int() refuses (ValueError) texts beyond Python's digit limit, and no int64 has 21 chars.
    number = int(value.text) if len(value.text) <= 20 else _INT64[1] + 1
    if not _INT64[0] <= number <= _INT64[1]:
        raise _error(item, f"{key} is out of the 64-bit integer range")
    return number


def _sub_object(value: JsonValue, item: str, key: str, keys: Sequence[str]) -> dict[str, JsonValue]:
    if not isinstance(value, JsonObject):
        raise _error(item, f"{key} entries must be objects")
    return _fold_fields(value, keys)


def _port_mapping(value: JsonValue, item: str) -> PortMapping:
    f = _sub_object(value, item, "portMappings", ("hostPort", "containerPort", "protocol", "hostIP"))
    return PortMapping(
        host_port=_as_int(f.get("hostPort"), item, "portMappings.hostPort"),
        container_port=_as_int(f.get("containerPort"), item, "portMappings.containerPort"),
        protocol=_as_str(f.get("protocol", ""), item, "portMappings.protocol"),
        host_ip=_as_str(f.get("hostIP", ""), item, "portMappings.hostIP"),
    )


def _bandwidth(value: JsonValue, item: str) -> Bandwidth | None:
    if value is None:
        return None
    keys = ("ingressRate", "ingressBurst", "egressRate", "egressBurst")
    f = _sub_object(value, item, "bandwidth", keys)
    rates = [_as_int(f.get(k), item, f"bandwidth.{k}") for k in keys]
    return Bandwidth(*rates)


# Go's net.ParseMAC: 6, 8 or 20 octets, colon/hyphen pairs or dotted quads of hex digits. Kept
# as text: re compiles (and caches) them when a selection first gives a MAC, not on every start.
_MAC_FORMS = tuple(
    form
    for n in (6, 8, 20)
    for form in (
        f"{_HEX_PAIR}(?::{_HEX_PAIR}){{{n - 1}}}",
        f"{_HEX_PAIR}(?:-{_HEX_PAIR}){{{n - 1}}}",
        f"{_HEX_QUAD}(?:\\.{_HEX_QUAD}){{{n // 2 - 1}}}",
    )
)


def _is_go_mac(text: str) -> bool:
    import re  # noqa: PLC0415 - only a selection that gives a MAC pays for it

    return any(re.fullmatch(form, text) for form in _MAC_FORMS)


def _is_go_ip(text: str) -> bool:
    # Go's net.ParseIP has no IPv6 zones; Python's ip_address accepts "fe80::1%eth0".
    import ipaddress  # noqa: PLC0415 - only addresses and routes need it, not every start

    if "%" in text:
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_prefix_len(text: str) -> bool:
    return text == "0" or (0 < len(text) <= 3 and text[0] != "0" and _DIGITS.issuperset(text))


def _is_go_cidr(text: str) -> bool:
    import ipaddress  # noqa: PLC0415 - only addresses and routes need it, not every start

    addr, _, prefix = text.partition("/")
    if not _is_go_ip(addr) or not _is_prefix_len(prefix):
        return False
    return int(prefix) <= ipaddress.ip_address(addr).max_prefixlen
