"""A list response's items decoded while it streams in (sriov_dra.kube.transport.stream_items), chunk by chunk."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from sriov_dra.apierrors import ApiError
from sriov_dra.kube.transport import list_streamed, stream_items

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
items = st.lists(st.dictionaries(st.text(max_size=6), values, max_size=5), max_size=8)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(
    items=items,
    metadata=values,
    indent=st.sampled_from([None, 0, 2]),
    items_first=st.booleans(),
    cuts=st.lists(st.integers(0, 10**6), max_size=12),
)
def test_items_match_a_whole_document_decode_however_the_bytes_are_cut(
    items: list[Any], metadata: Any, indent: int | None, items_first: bool, cuts: list[int]
) -> None:
    doc = {"items": items, "metadata": metadata} if items_first else {"metadata": metadata, "items": items}
    data = json.dumps({"kind": "List", **doc}, indent=indent, ensure_ascii=False).encode()
    assert list(stream_items(chunked(data, cuts))) == json.loads(data)["items"]


@pytest.mark.parametrize("number", [b"12345", b"173722111.0", b"-1.5e-3", b"2E+10"])
def test_a_number_cut_anywhere_at_a_chunk_end_is_read_whole(number: bytes) -> None:
    """Also right after its point or exponent sign, where its first part alone is valid JSON."""
    data = b'{"items":[' + number + b'],"n":' + number + b"}"
    for cut in range(1, len(data)):
        assert list(stream_items([data[:cut], data[cut:]])) == [json.loads(number)]


@pytest.mark.parametrize("doc", [b'{"kind":"List"}', b'{"items":null}', b'{"items":[]}', b" {} \n"])
def test_documents_without_items_yield_none(doc: bytes) -> None:
    assert list(stream_items([doc])) == []


@pytest.mark.parametrize(
    "doc",
    [
        b"",
        b'{"items":[{"a":1}',
        b'{"items":[{"a":1}]',
        b'{"items":[{"a":1} {"b":2}]}',
        b'{"items":[{"a":1},]}',
        b'{"items":[]} {}',
        b'[{"a":1}]',
        b'{"items":[{"a":1}],}',
        b'{"items" [1]}',
        b'{"items":[{"a":tru}]}',
        b'{"items":["\xff"]}',
    ],
)
def test_malformed_documents_raise_value_error(doc: bytes) -> None:
    with pytest.raises(ValueError):
        list(stream_items([doc[:5], doc[5:]]))


def test_items_arrive_before_the_rest_of_the_response() -> None:
    """Each item is handed over once its own bytes are in; nothing waits for the whole body."""
    read: list[bytes] = []

    def chunks():
        for part in (b'{"items":[{"a":1},', b'{"b":2}', b"]}"):
            read.append(part)
            yield part

    stream = stream_items(chunks())
    assert next(stream) == {"a": 1} and len(read) == 1
    assert next(stream) == {"b": 2} and len(read) == 3
    assert list(stream) == []


class _Truncating(http.server.BaseHTTPRequestHandler):
    """Announces a longer body than it sends, then hangs up: a connection lost mid-list."""

    def do_GET(self) -> None:
        body = b'{"items":[{"a":1},{"b":'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) + 100))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def truncating_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Truncating)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_connection_lost_mid_list_is_an_api_error_with_unknown_outcome(truncating_server: str) -> None:
    api = client.ApiClient(client.Configuration(host=truncating_server))
    with pytest.raises(ApiError) as err:
        list(list_streamed(api, "/apis/x/v1/things", "things", []))
    assert err.value.status == 0 and err.value.outcome_unknown and "GET things" in err.value.message
