"""The kubelet wire format, independent of our own .proto copies.

The fake kubelet uses the same generated stubs as the driver, so a wrong field number or package
in driver/kubeletplugin/protos would pass every other test. Here the bytes are written and read
by a few lines of protobuf encoding that only know the field numbers and gRPC paths kubelet uses
(k8s.io/kubelet pkg/apis/dra/{v1,v1beta1}/api.proto and pkg/apis/pluginregistration/v1/api.proto).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import grpc
import pytest

from sriov_dra.kubeletplugin.api import ClaimRef, DeviceResult, PrepareOutcome
from sriov_dra.kubeletplugin.gen import dra_v1_pb2, dra_v1beta1_pb2, pluginregistration_v1_pb2
from sriov_dra.kubeletplugin.server import KubeletPlugin, SocketPaths
from testbed.fake_kubelet import KubeletDirs

DRA = {
    "v1": ("k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", dra_v1_pb2),
    "v1beta1": ("k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin", dra_v1beta1_pb2),
}
REGISTRATION = "pluginregistration.Registration"
VARINT, LEN = 0, 2

# -- the smallest protobuf encoder and decoder that covers these messages -----------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: bytes | str | bool) -> bytes:
    if isinstance(value, bool):
        return varint(number << 3 | VARINT) + varint(int(value))
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | LEN) + varint(len(data)) + data


def fields(*pairs: tuple[int, bytes | str | bool]) -> bytes:
    return b"".join(field(n, v) for n, v in pairs)


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[at]
        n |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return n, at


def parse(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) in wire order; varints as int, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, at = read_varint(data, at)
            out.append((number, value))
        elif wire == LEN:
            size, at = read_varint(data, at)
            out.append((number, data[at : at + size]))
            at += size
        else:
            raise AssertionError(f"unexpected wire type {wire} for field {number}")
    return out


def strings(data: bytes, number: int) -> list[str]:
    return [v.decode() for n, v in parse(data) if n == number and isinstance(v, bytes)]


def one(data: bytes, number: int) -> str:
    (value,) = strings(data, number)
    return value


def claim_bytes(namespace: str, uid: str, name: str) -> bytes:
    return fields((1, namespace), (2, uid), (3, name))


def map_entry(key: str, value: bytes) -> bytes:
    """One entry of the map<string, message> field 1 of a response."""
    return field(1, fields((1, key), (2, value)))


def entries(data: bytes) -> dict[str, bytes]:
    """A map<string, message> field 1: key = entry field 1, value = entry field 2."""
    out: dict[str, bytes] = {}
    for number, entry in parse(data):
        assert number == 1 and isinstance(entry, bytes)
        parts = dict(parse(entry))
        key, value = parts[1], parts.get(2, b"")
        assert isinstance(key, bytes) and isinstance(value, bytes)
        out[key.decode()] = value
    return out


CLAIMS = [("ns-a", "uid-1", "claim-1"), ("ns-b", "uid-2", "claim-2")]

# -- hand-made bytes decoded by the generated stubs ---------------------------------------------


@pytest.mark.parametrize("version", sorted(DRA))
def test_requests_decode_with_kubelets_field_numbers(version: str) -> None:
    _service, pb = DRA[version]
    wire = b"".join(field(1, claim_bytes(*c)) for c in CLAIMS)
    for message in (pb.NodePrepareResourcesRequest, pb.NodeUnprepareResourcesRequest):
        decoded = message.FromString(wire)
        assert [(c.namespace, c.uid, c.name) for c in decoded.claims] == CLAIMS


@pytest.mark.parametrize("version", sorted(DRA))
def test_prepare_response_decodes_with_kubelets_field_numbers(version: str) -> None:
    _service, pb = DRA[version]
    device = fields(
        (1, "vf"),
        (1, "gpu"),
        (2, "node-a"),
        (3, "0000-17-00-1"),
        (4, "vendor.example/vf=uid-1-0000-17-00-1"),
        (4, "vendor.example/vf=pod-1"),
    )
    if version == "v1":
        device += field(5, "share-7")
    wire = map_entry("uid-1", field(1, device)) + map_entry("uid-2", field(2, "Broken: why"))
    decoded = pb.NodePrepareResourcesResponse.FromString(wire)
    assert sorted(decoded.claims) == ["uid-1", "uid-2"]
    (got,) = decoded.claims["uid-1"].devices
    assert list(got.request_names) == ["vf", "gpu"]
    assert (got.pool_name, got.device_name) == ("node-a", "0000-17-00-1")
    assert list(got.cdi_device_ids) == ["vendor.example/vf=uid-1-0000-17-00-1", "vendor.example/vf=pod-1"]
    assert decoded.claims["uid-1"].error == ""
    assert decoded.claims["uid-2"].error == "Broken: why" and not decoded.claims["uid-2"].devices
    if version == "v1":
        assert got.HasField("share_id") and got.share_id == "share-7"
    else:  # v1beta1 has no field 5: it stays an unknown field, never lands in another one
        assert "share_id" not in pb.Device.DESCRIPTOR.fields_by_name


@pytest.mark.parametrize("version", sorted(DRA))
def test_unprepare_response_decodes_with_kubelets_field_numbers(version: str) -> None:
    _service, pb = DRA[version]
    wire = map_entry("uid-1", b"") + map_entry("uid-2", field(1, "Busy: later"))
    decoded = pb.NodeUnprepareResourcesResponse.FromString(wire)
    assert {k: v.error for k, v in decoded.claims.items()} == {"uid-1": "", "uid-2": "Busy: later"}


def test_registration_messages_decode_with_kubelets_field_numbers() -> None:
    pb = pluginregistration_v1_pb2
    info = pb.PluginInfo.FromString(
        fields(
            (1, "DRAPlugin"),
            (2, "drv.example"),
            (3, "/p/dra.sock"),
            (4, "v1.DRAPlugin"),
            (4, "v1beta1.DRAPlugin"),
        )
    )
    assert (info.type, info.name, info.endpoint) == ("DRAPlugin", "drv.example", "/p/dra.sock")
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    status = pb.RegistrationStatus.FromString(fields((1, True), (2, "no such version")))
    assert status.plugin_registered is True and status.error == "no such version"


def test_service_names_in_the_descriptors_are_kubelets() -> None:
    for service, pb in DRA.values():
        assert pb.DESCRIPTOR.services_by_name["DRAPlugin"].full_name == service
    registration = pluginregistration_v1_pb2.DESCRIPTOR.services_by_name["Registration"]
    assert registration.full_name == REGISTRATION


# -- the running servers, spoken to in raw bytes at kubelet's method paths ----------------------


class OneDevice:
    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        return {
            c.uid: PrepareOutcome(
                devices=(DeviceResult(("vf",), "node-a", "0000-17-00-1", (f"x.example/vf={c.uid}",)),)
            )
            if c.name != "bad"
            else PrepareOutcome(error="BadClaim: it is bad")
            for c in claims
        }

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        return {c.uid: "" if c.name != "bad" else "Stuck: retry" for c in claims}


@pytest.fixture
def sockets(kubelet_dirs: KubeletDirs) -> Iterator[SocketPaths]:
    paths = SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins)
    plugin = KubeletPlugin(paths, OneDevice())
    yield paths
    plugin.stop(0)


def call(socket: object, path: str, request: bytes) -> bytes:
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        # No (de)serializers: the request and response are the raw message bytes.
        answer = channel.unary_unary(path)(request, timeout=10)
        assert isinstance(answer, bytes)
        return answer


@pytest.mark.parametrize("version", sorted(DRA))
def test_dra_methods_at_kubelets_paths_answer_kubelets_bytes(sockets: SocketPaths, version: str) -> None:
    service, _pb = DRA[version]
    request = field(1, claim_bytes("ns", "uid-ok", "good")) + field(1, claim_bytes("ns", "uid-bad", "bad"))

    prepared = entries(call(sockets.dra_socket, f"/{service}/NodePrepareResources", request))
    assert sorted(prepared) == ["uid-bad", "uid-ok"]
    (device,) = [v for n, v in parse(prepared["uid-ok"]) if n == 1]
    assert isinstance(device, bytes)
    assert strings(device, 1) == ["vf"]
    assert (one(device, 2), one(device, 3)) == ("node-a", "0000-17-00-1")
    assert strings(device, 4) == ["x.example/vf=uid-ok"]
    assert strings(device, 5) == []  # no share ID: VFs are exclusive
    assert strings(prepared["uid-ok"], 2) == []
    assert one(prepared["uid-bad"], 2) == "BadClaim: it is bad"

    unprepared = entries(call(sockets.dra_socket, f"/{service}/NodeUnprepareResources", request))
    assert sorted(unprepared) == ["uid-bad", "uid-ok"]  # every claim has an entry, even a clean one
    assert unprepared["uid-ok"] == b"" and one(unprepared["uid-bad"], 1) == "Stuck: retry"


def test_registration_at_kubelets_paths(sockets: SocketPaths) -> None:
    info = call(sockets.registration_socket, f"/{REGISTRATION}/GetInfo", b"")
    assert one(info, 1) == "DRAPlugin"
    assert one(info, 2) == "sriovnetwork.k8snetworkplumbingwg.io"
    assert one(info, 3) == str(sockets.dra_socket)
    assert strings(info, 4) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    path = f"/{REGISTRATION}/NotifyRegistrationStatus"
    assert call(sockets.registration_socket, path, field(1, True)) == b""


def test_a_path_kubelet_does_not_use_is_unimplemented(sockets: SocketPaths) -> None:
    with pytest.raises(grpc.RpcError) as err:
        call(sockets.dra_socket, "/k8s.io.kubelet.pkg.apis.dra.DRAPlugin/NodePrepareResources", b"")
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_encoder_matches_the_protobuf_runtime() -> None:
    """The test's own encoder, checked once against the runtime on a message with every shape."""
    message = dra_v1_pb2.Device(
        request_names=["a", "b"], pool_name="p" * 200, device_name="d", cdi_device_ids=["c"], share_id="s"
    )
    expected = fields((1, "a"), (1, "b"), (2, "p" * 200), (3, "d"), (4, "c"), (5, "s"))
    assert message.SerializeToString() == expected
    assert pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=True).SerializeToString() == (
        field(1, True)
    )
