"""The node agent's API transport: one raw request (timeout, error mapping), the streaming list
reader and the watch loop. Every call the resource adapters (sriov_dra.kube.resources) make goes
through here, so this is where a failure becomes an sriov_dra.apierrors.ApiError."""

from __future__ import annotations

import codecs
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from sriov_dra.apierrors import NOT_FOUND, ApiError, api_error

log = logging.getLogger(__name__)


# The client's default is no timeout at all: a black-holed connection would hold the claim and
# Pod locks (and every later kubelet retry waiting on them) until TCP gives up. Bounded well
# below kubelet's 45 s call deadline, so kubelet gets our reasoned "no response" error instead.
REQUEST_TIMEOUT_S: Final = 15.0
# Bytes read from a streamed list response at a time: what our side holds of a list, whatever
# its length, is this plus the item being looked at (a shadow is about 2.3 KiB of JSON).
STREAM_CHUNK: Final = 256 * 1024
# A list's items as PartialObjectMetadata, or else the full objects.
METADATA_LIST: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def items(result: Any) -> list[dict[str, Any]]:
    """The items of a list response read whole."""
    return list(result.get("items") or [])


def _send(
    api: client.ApiClient,
    method: str,
    path: str,
    what: str,
    *,
    body: Any = None,
    content_type: str = "application/json",
    query: list[tuple[str, str]] | None = None,
    reason: str | None = None,
    accept: str = "application/json",
) -> Any:
    """One raw API call; returns the response with its body still unread. A transport failure
    becomes an ApiError with status 0: outcome unknown. `reason` as for api_error."""
    headers = {"Accept": accept, "Content-Type": content_type}
    if method == "GET":
        # kube-apiserver compresses answers over 128 KiB when asked (a list of shadows or Pods
        # shrinks about tenfold); urllib3 decodes as it reads, streamed lists included.
        headers["Accept-Encoding"] = "gzip"
    m, url, hdrs, data, _ = api.param_serialize(
        method, path, query_params=query, header_params=headers, body=body, auth_settings=["BearerToken"]
    )
    try:
        return api.call_api(m, url, header_params=hdrs, body=data, _request_timeout=REQUEST_TIMEOUT_S)
    except ApiException as exc:
        raise api_error(int(exc.status or 0), method, what, str(exc.reason or ""), reason=reason) from None
    except Exception as exc:  # urllib3 connection errors: no answer, the outcome is unknown
        raise api_error(0, method, what, exc.__class__.__name__, reason=reason) from None


def _read(resp: Any, method: str, what: str, reason: str | None = None) -> bytes:
    try:
        return bytes(resp.read())
    except Exception as exc:  # the connection broke mid-body
        raise api_error(0, method, what, exc.__class__.__name__, reason=reason) from None


def _failure(status: int, raw: bytes, method: str, what: str, reason: str | None = None) -> ApiError:
    try:
        detail = str(json.loads(raw).get("message", ""))
    except ValueError:
        detail = raw[:200].decode(errors="replace")
    return api_error(status, method, what, detail, reason=reason)


def request(
    api: client.ApiClient, method: str, path: str, what: str, *, reason: str | None = None, **options: Any
) -> dict[str, Any] | None:
    """One raw API call (`options` as for _send) returning the object as API JSON (camelCase, no
    model conversion), None for a 404 on reads, or an ApiError. A transport failure becomes
    status 0: outcome unknown. Every call of the resource adapters ends here or in list_streamed,
    so this is where failures are mapped; `reason` as for api_error."""
    resp = _send(api, method, path, what, reason=reason, **options)
    raw = _read(resp, method, what, reason)
    if resp.status == NOT_FOUND and method in ("GET", "DELETE"):
        return None
    if resp.status >= 400:
        raise _failure(resp.status, raw, method, what, reason)
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise api_error(resp.status, method, what, "the response is not a JSON object", reason=reason)
    return obj


def required(obj: dict[str, Any] | None, verb: str, what: str) -> dict[str, Any]:
    if obj is None:
        raise api_error(NOT_FOUND, verb, what)
    return obj


def json_patch(api: client.ApiClient, path: str, what: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
    """An RFC 6902 patch; its `test` ops make it fail (422) instead of writing over a change."""
    sent = request(api, "PATCH", path, what, body=ops, content_type="application/json-patch+json")
    return required(sent, "PATCH", what)


_BLANK: Final = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL: Final = re.compile(r"[0-9.eE+-]*")
_DECODER: Final = json.JSONDecoder()


class _Text:
    """Byte chunks as one str, decoded as they arrive; text before `pos` is dropped on refill."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._ended = False
        self.buf = ""
        self.pos = 0

    def refill(self) -> bool:
        """Append the next chunk; False once the input has ended."""
        if self._ended:
            return False
        chunk = next(self._chunks, None)
        self._ended = chunk is None
        self.buf = self.buf[self.pos :] + self._utf8.decode(chunk or b"", final=self._ended)
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-blank character, not consumed ("" at the end of the input)."""
        while True:
            self.pos = _BLANK.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.refill():
                return ""

    def expect(self, allowed: str) -> str:
        found = self.peek()
        if not found or found not in allowed:
            raise ValueError(f"expected one of {allowed!r}, found {found or 'the end'!r}")
        self.pos += 1
        return found

    def value(self) -> Any:
        """The next complete JSON value."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if not self.refill():
                    raise
                continue
            # A number may go on in the next chunk (12|34, 12.|5, 1e|5): only what follows it here
            # (a blank, a comma or a bracket) proves it ended.
            if _NUMBER_TAIL.match(self.buf, end).end() < len(self.buf) or not self.refill():  # type: ignore[union-attr]
                self.pos = end
                return value


def _elements(text: _Text) -> Iterator[Any]:
    text.expect("[")
    if text.peek() == "]":
        text.pos += 1
        return
    while True:
        yield text.value()
        if text.expect(",]") == "]":
            return


def stream_items(chunks: Iterable[bytes], key: str = "items") -> Iterator[Any]:
    """The elements of the top-level JSON object's `key` array, each decoded as soon as its bytes
    have arrived; the rest of the document is checked for syntax and dropped. Raises ValueError
    for anything that is not one well-formed JSON object."""
    text = _Text(chunks)
    text.expect("{")
    end = text.peek() == "}"
    if end:
        text.pos += 1
    while not end:
        name = text.value()
        if not isinstance(name, str):
            raise ValueError("an object key is not a string")
        text.expect(":")
        if name == key and text.peek() == "[":
            yield from _elements(text)
        else:
            text.value()
        end = text.expect(",}") == "}"
    if text.peek():
        raise ValueError("text follows the JSON object")


def list_streamed(
    api: client.ApiClient,
    path: str,
    what: str,
    query: list[tuple[str, str]],
    accept: str = "application/json",
) -> Iterator[dict[str, Any]]:
    """Every item of one list request as API JSON, decoded while the response streams in.

    One request is one consistent snapshot and the API server's cheapest list: paged by `limit`
    it cost kube-apiserver 1.36 six to ten times the CPU (8000 shadows, pages of 500: 3.4-6.6 s
    against 0.5 s), and the wall time with it. Memory on our side stays
    bounded all the same, because no more than a chunk of the response is held at a time. The
    request goes out now and the items are read as the caller iterates, so whatever the caller
    does in between overlaps the API server's work."""
    resp = _send(api, "GET", path, what, query=query, accept=accept)
    if resp.status >= 400:
        raise _failure(resp.status, _read(resp, "GET", what), "GET", what)
    return _items_of(resp, what)


def _items_of(resp: Any, what: str) -> Iterator[dict[str, Any]]:
    finished = False
    try:
        # read(n) waits for n bytes (or the end), where stream() would hand over every HTTP chunk
        # of a few KiB, each costing a failed decode of the item it cuts in two.
        for item in stream_items(iter(lambda: resp.response.read(STREAM_CHUNK), b"")):
            if not isinstance(item, dict):
                raise ValueError("a list item is not a JSON object")
            yield item
        finished = True
    except ValueError as exc:
        raise api_error(resp.status, "GET", what, f"the response is not a JSON list: {exc}") from None
    except Exception as exc:  # the connection broke mid-body: the listing is incomplete
        raise api_error(0, "GET", what, exc.__class__.__name__) from None
    finally:
        if not finished:
            resp.response.close()  # unread bytes must not go back to the connection pool


def watch_forever(
    what: str,
    list_fn: Callable[..., Any],
    kwargs: Mapping[str, Any],
    on_event: Callable[[], None],
    stop: threading.Event,
) -> None:
    """Call on_event for every change of the watched objects until stop is set; re-lists on errors."""
    while not stop.is_set():
        w = watch.Watch()  # type: ignore[no-untyped-call]
        try:
            for _event in w.stream(list_fn, timeout_seconds=30, **kwargs):  # type: ignore[no-untyped-call]
                on_event()
                if stop.is_set():
                    break
        except Exception as exc:  # the API server restarting or a 410 Gone: re-list and carry on
            log.warning("watch of %s failed (%s); re-listing", what, exc)
            on_event()
            stop.wait(1.0)
        finally:
            w.stop()  # type: ignore[no-untyped-call]
