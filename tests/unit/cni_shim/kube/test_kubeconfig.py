"""Kubeconfig parsing (JSON on the hot path, YAML fallback) and the stdlib client's requests."""

from __future__ import annotations

import base64
import io
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cni_shim.errors import ApiError, CniError
from cni_shim.kube import kubeconfig, paths, thin_client
from cni_shim.kube.thin_client import KubeClient
from tests.support.httpjson import send_json


def _doc(user, cluster=None):
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": cluster or {"server": "https://10.0.0.1:6443", "certificate-authority": "ca.crt"},
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def test_json_kubeconfig_with_files_resolves_relative_paths(tmp_path):
    path = tmp_path / "kc.json"
    path.write_text(
        json.dumps(_doc({"client-certificate": "c.pem", "client-key": "/abs/k.pem", "tokenFile": "tok"}))
    )
    conn = kubeconfig.load(str(path))
    assert conn.server == "https://10.0.0.1:6443"
    assert conn.ca_file == str(tmp_path / "ca.crt")
    assert conn.cert_file == str(tmp_path / "c.pem")
    assert conn.key_file == "/abs/k.pem"
    assert conn.token_file == str(tmp_path / "tok")


def test_yaml_kubeconfig_with_inline_data_and_insecure_flag(tmp_path):
    cert = base64.b64encode(b"CERT").decode()
    doc = _doc(
        {"client-certificate-data": cert, "client-key-data": cert, "token": "abc"},
        {"server": "https://h:1/", "insecure-skip-tls-verify": True, "certificate-authority-data": cert},
    )
    path = tmp_path / "kc.yaml"
    path.write_text(yaml.safe_dump(doc))
    conn = kubeconfig.load(str(path))
    assert (conn.server, conn.insecure, conn.token) == ("https://h:1", True, "abc")
    assert conn.cert_data == conn.key_data == conn.ca_data == b"CERT"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"current-context": "nope", "contexts": []}',
        json.dumps(_doc({}, {"server": "ftp://x"})),
        ": : :",
    ],
)
def test_unusable_kubeconfig_is_a_named_config_error(tmp_path, text):
    path = tmp_path / "kc"
    path.write_text(text)
    with pytest.raises(CniError) as err:
        kubeconfig.load(str(path))
    assert err.value.reason == "InvalidKubeconfig"
    assert err.value.code == 7


def test_in_cluster_needs_both_env_vars():
    assert kubeconfig.in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) is None
    conn = kubeconfig.in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"})
    assert conn is not None and conn.server == "https://[fd00::1]:443"
    assert conn.token_file.endswith("serviceaccount/token")


class _Api(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None]] = []

    def log_message(self, *args):
        pass

    def _reply(self, code, body):
        send_json(self, code, body)

    def do_GET(self):
        self.seen.append(("GET", self.path, self.headers.get("Authorization")))
        if self.path.endswith("/pods/p1"):
            self._reply(200, {"metadata": {"name": "p1", "uid": "u1"}})
        elif self.path.endswith("/pods/forbidden"):
            self._reply(403, {"message": "pods is forbidden"})
        else:
            self._reply(404, {"message": "not found"})

    def do_PUT(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(("PUT", self.path, body["metadata"]["name"]))
        self._reply(409, {"message": "conflict"})


@pytest.fixture
def api_server():
    _Api.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Api.seen
    server.shutdown()
    server.server_close()


def test_client_sends_bearer_token_and_maps_statuses(api_server, tmp_path):
    url, seen = api_server
    token = tmp_path / "token"
    token.write_text("secret\n")
    client = KubeClient(kubeconfig.Connection(server=url, token_file=str(token)))
    assert client.get_pod("ns", "p1") == {"metadata": {"name": "p1", "uid": "u1"}}
    assert client.get_nad("ns", "a/b") is None
    with pytest.raises(ApiError) as err:
        client.get_pod("ns", "forbidden")
    assert err.value.status == 403 and "forbidden" in err.value.message
    with pytest.raises(ApiError) as err:
        client.replace_pod_status({"metadata": {"namespace": "ns", "name": "p1"}})
    assert err.value.status == 409
    assert seen[0] == ("GET", "/api/v1/namespaces/ns/pods/p1", "Bearer secret")
    assert seen[1][1] == "/apis/k8s.cni.cncf.io/v1/namespaces/ns/network-attachment-definitions/a%2Fb"
    assert seen[-1] == ("PUT", "/api/v1/namespaces/ns/pods/p1/status", "p1")


def test_unreachable_server_is_a_transient_error():
    client = KubeClient(kubeconfig.Connection(server="http://127.0.0.1:1"), timeout=1.0)
    with pytest.raises(ApiError) as err:
        client.get_pod("ns", "p")
    assert err.value.status == 0 and err.value.code == 11


def test_response_parser_handles_sized_chunked_and_hostile_bodies():
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    assert thin_client.read_response(io.BytesIO(sized)) == (200, {"content-length": "2"}, b"{}")
    chunked = b"HTTP/1.1 404 NF\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    assert thin_client.read_response(io.BytesIO(chunked))[2] == b"abcde"
    for hostile in (
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"SSH-2.0-OpenSSH\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 70000 + b"\r\n\r\n",
        b"",
    ):
        with pytest.raises(thin_client._ProtocolError):
            thin_client.read_response(io.BytesIO(hostile))


_SERVERS = st.tuples(
    st.sampled_from(["https://", "http://", "HTTPS://"]),
    st.sampled_from(["", "u:p@"]),
    st.sampled_from(["h", "H.Example", "[::1]", "[fe80::1]", "10.0.0.1"]),
    st.sampled_from(["", ":6443", ":", ":0", ":65536", ":x1"]),
    st.sampled_from(["", "/", "/pre/", "/a/b", "?q=1", "#f", "/x?y#z"]),
).map("".join)


@given(_SERVERS)
def test_server_urls_split_as_urllib_splits_them(server):
    url = urllib.parse.urlsplit(server)
    try:
        expected: object = (
            url.scheme == "https",
            url.hostname or "",
            url.port or (443 if url.scheme == "https" else 80),
            url.path.rstrip("/"),
        )
    except ValueError:
        expected = ValueError
    try:
        got: object = kubeconfig.split_server(server)
    except ValueError:
        got = ValueError
    assert got == expected


@given(st.text())
def test_path_segments_are_quoted_as_urllib_quotes_them(segment):
    assert paths.q(segment) == urllib.parse.quote(segment, safe="")


def test_a_server_with_a_bad_port_is_a_named_config_error(tmp_path):
    kc = tmp_path / "kc.json"
    kc.write_text(json.dumps(_doc({"token": "t"}, {"server": "https://h:64k"})))
    with pytest.raises(CniError, match="'64k' is not a number") as err:
        kubeconfig.load(str(kc))
    assert err.value.reason == "InvalidKubeconfig"
