"""The thin client's TLS, which it drives through the `_ssl` layer itself: a real TLS server on
loopback with a certificate from a test CA, and the client's verification, client certificates
and kept-alive connections against it."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cni_shim.errors import ApiError
from cni_shim.kube.kubeconfig import Connection
from cni_shim.kube.thin_client import KubeClient, ssl_context
from testbed.pki import CertificateAuthority
from tests.support.httpjson import send_json


@dataclass
class _Seen:
    connections: int = 0
    client_names: list[str] = field(default_factory=list)
    close_after_reply: bool = False


class _Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: _Seen

    def setup(self) -> None:
        super().setup()
        self.seen.connections += 1
        peer = self.connection.getpeercert()
        subject = dict(item[0] for item in peer["subject"]) if peer else {}
        self.seen.client_names.append(subject.get("commonName", ""))

    def do_GET(self) -> None:
        send_json(self, 200, {"metadata": {"name": self.path.rsplit("/", 1)[-1]}})
        if self.seen.close_after_reply:
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class _Tls:
    url: str
    ca: CertificateAuthority
    seen: _Seen
    client_cert: Path
    client_key: Path


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[_Tls]:
    ca = CertificateAuthority.create(tmp_path / "ca")
    serving = ca.issue_serving()
    client = ca.issue_client("shim", "system:node:n1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(serving.cert, serving.key)
    context.load_verify_locations(ca.cert_file)
    context.verify_mode = ssl.CERT_OPTIONAL  # a client may also come with a bearer token alone
    seen = _Seen()
    handler = type("Api", (_Api,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _Tls(f"https://127.0.0.1:{server.server_address[1]}", ca, seen, client.cert, client.key)
    server.shutdown()
    server.server_close()


def test_verified_tls_with_a_client_certificate_on_one_kept_alive_connection(tls_server: _Tls) -> None:
    conn = Connection(
        server=tls_server.url,
        ca_file=str(tls_server.ca.cert_file),
        cert_file=str(tls_server.client_cert),
        key_file=str(tls_server.client_key),
    )
    client = KubeClient(conn)
    assert client.get_pod("ns", "p1") == {"metadata": {"name": "p1"}}
    assert client.get_nad("ns", "n1") == {"metadata": {"name": "n1"}}
    client.close()
    assert tls_server.seen.connections == 1
    assert tls_server.seen.client_names == ["system:node:n1"]


def test_inline_ca_and_key_material_verify_the_same_way(tls_server: _Tls) -> None:
    conn = Connection(
        server=tls_server.url,
        ca_data=tls_server.ca.cert_file.read_bytes(),
        cert_data=tls_server.client_cert.read_bytes(),
        key_data=tls_server.client_key.read_bytes(),
    )
    assert KubeClient(conn).get_pod("ns", "p2") == {"metadata": {"name": "p2"}}
    assert tls_server.seen.client_names == ["system:node:n1"]


def test_a_server_name_the_certificate_does_not_carry_is_refused(tls_server: _Tls) -> None:
    conn = Connection(
        server=tls_server.url, ca_file=str(tls_server.ca.cert_file), tls_server_name="api.example.org"
    )
    with pytest.raises(ApiError) as err:
        KubeClient(conn).get_pod("ns", "p")
    assert err.value.status == 0 and "CERTIFICATE_VERIFY_FAILED" in err.value.message
    assert "api.example.org" in err.value.message


def test_the_name_the_certificate_carries_is_accepted_over_the_ip(tls_server: _Tls) -> None:
    conn = Connection(
        server=tls_server.url, ca_file=str(tls_server.ca.cert_file), tls_server_name="localhost"
    )
    assert KubeClient(conn).get_pod("ns", "p3") == {"metadata": {"name": "p3"}}


def test_an_unknown_ca_is_refused_unless_the_kubeconfig_is_insecure(tls_server: _Tls, tmp_path: Path) -> None:
    other = CertificateAuthority.create(tmp_path / "other", common_name="other-ca")
    with pytest.raises(ApiError) as err:
        KubeClient(Connection(server=tls_server.url, ca_file=str(other.cert_file))).get_pod("ns", "p")
    assert "CERTIFICATE_VERIFY_FAILED" in err.value.message
    insecure = Connection(server=tls_server.url, ca_file=str(other.cert_file), insecure=True)
    assert KubeClient(insecure).get_pod("ns", "p4") == {"metadata": {"name": "p4"}}


def test_a_connection_the_server_closed_is_replaced_and_siblings_connect_on_their_own(
    tls_server: _Tls,
) -> None:
    client = KubeClient(Connection(server=tls_server.url, ca_file=str(tls_server.ca.cert_file)))
    tls_server.seen.close_after_reply = True
    assert client.get_pod("ns", "a") == {"metadata": {"name": "a"}}
    assert client.get_pod("ns", "b") == {"metadata": {"name": "b"}}
    sibling = client.sibling()
    assert sibling.get_pod("ns", "c") == {"metadata": {"name": "c"}}
    assert tls_server.seen.connections == 3


def test_the_ssl_module_context_for_urllib3_carries_the_same_settings(tls_server: _Tls) -> None:
    conn = Connection(server=tls_server.url, ca_file=str(tls_server.ca.cert_file), insecure=True)
    context = ssl_context(conn)
    assert isinstance(context, ssl.SSLContext)
    assert (context.check_hostname, context.verify_mode) == (False, ssl.CERT_NONE)
    strict = ssl_context(Connection(server=tls_server.url, ca_file=str(tls_server.ca.cert_file)))
    assert (strict.check_hostname, strict.verify_mode) == (True, ssl.CERT_REQUIRED)
    assert strict.cert_store_stats()["x509_ca"] == 1
