"""One `/cni` request inside the daemon: decode, overlay the daemon config, pick the API view, run the core.

The handler is the thin mode's own (cni_shim.handler.invoke), so a thick answer is byte for byte what a
thin invocation with the same merged config would print. Its outcome (result or CniError) is
written once, here, as the HTTP answer's body.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from cni_shim import handler, reasons
from cni_shim.core import cniargs, netconf
from cni_shim.core.protocol import Outcome, render_error, render_result
from cni_shim.errors import DECODE_FAILURE, INVALID_ENVIRONMENT, CniError
from cni_shim.ports import KubeApi
from cni_shim.thick.eventqueue import Collector

MAX_BODY = 16 * 1024 * 1024
# The verbs Multus's daemon refuses when CNI_ARGS does not name the Pod, and whose failures it
# words with the request. A DEL stays lenient and keeps thin mode's text: one that ran no delegate
# would leak what the ADD set up, and Multus's shim never shows a runtime a DEL error anyway.
_MULTUS_WORDED = ("ADD", "CHECK")


def overlay(stdin: bytes, daemon_config: Mapping[str, Any]) -> dict[str, Any]:
    """Multus's overlay: every top-level key of the daemon config replaces the shim's."""
    return {**netconf.decode_object(stdin), **daemon_config}


def decode_request(body: bytes) -> tuple[dict[str, str], bytes]:
    """The Multus `/cni` body: {"env": {...}, "config": "<base64>"}; returns (env, stdin)."""
    try:
        doc = json.loads(body)
        env = doc.get("env") or {}
        config = base64.b64decode(doc.get("config") or "", validate=True)
    except (ValueError, AttributeError, TypeError, binascii.Error) as exc:
        raise CniError(
            reasons.MALFORMED_DAEMON_REQUEST, f"the shim's request is not valid: {exc}", DECODE_FAILURE
        ) from exc
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise CniError(
            reasons.MALFORMED_DAEMON_REQUEST, "the shim's env must map strings to strings", DECODE_FAILURE
        )
    if not env.get("CNI_COMMAND"):
        raise CniError(reasons.MALFORMED_DAEMON_REQUEST, "unexpected or missing CNI_COMMAND", DECODE_FAILURE)
    return env, config


class _Slot:
    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()


class KeyedLocks:
    """One lock per container ID; a slot lives exactly as long as a request holds or awaits it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._slots: weakref.WeakValueDictionary[str, _Slot] = weakref.WeakValueDictionary()

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        if not key:
            yield
            return
        with self._guard:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot()
        with slot.lock:
            yield

    def __len__(self) -> int:
        with self._guard:
            return len(self._slots)


class Views(Protocol):
    """Builds the request's API view; None when the daemon runs without Kubernetes."""

    def live(self, *, prefetch: bool = True) -> KubeApi | None:
        """`prefetch`: the view may start the NAD reads the Pod's informer copy names (an ADD's
        reads); a lookup that reads only the Pod turns it off, so no NAD is read for nothing."""

    def cached(self) -> KubeApi | None: ...


class Events(Protocol):
    def request(self, command: str, result: str, seconds: float) -> None: ...


class PodEvents(Protocol):
    def submit(self, events: Sequence[Mapping[str, Any]]) -> None: ...


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    result: str  # "ok" or the error reason, for metrics and logs
    # Run by the server once the answer is sent (the request's Pod Events go to their queue).
    after: Callable[[], None] | None = None


class Dispatcher:
    def __init__(
        self,
        daemon_config: Mapping[str, Any],
        views: Views,
        events: Events,
        log: Callable[..., None],
        *,
        base_services: Callable[[Mapping[str, str]], handler.Services],
        clock: Callable[[], float] = time.monotonic,
        pod_events: PodEvents | None = None,
        drop_keys: Sequence[str] = (),
    ) -> None:
        self._config = dict(daemon_config)
        self._views = views
        self._events = events
        self._log = log
        self._base = base_services
        self._clock = clock
        self._pod_events = pod_events
        # Daemon-config keys never laid over the shim's (exact names: Multus's ignoreKeys, which
        # hold readinessindicatorfile when it generated the config itself); the shim's own stay.
        for key in drop_keys:
            self._config.pop(key, None)
        self.locks = KeyedLocks()

    def serve(self, body: bytes) -> Answer:
        start = self._clock()
        try:
            env, stdin = decode_request(body)
        except CniError as err:
            self._events.request("", err.reason, self._clock() - start)
            return Answer(400, render_error(err, "").encode(), err.reason)
        command = env["CNI_COMMAND"]
        fields = _fields(env)
        with self.locks.hold(env.get("CNI_CONTAINERID", "")):
            answer = self._run(env, stdin, command, fields)
        seconds = self._clock() - start
        self._events.request(command, answer.result, seconds)
        level = "info" if answer.status == 200 else "error"
        self._log(level, f"{command} {answer.result}", seconds=round(seconds, 6), **fields)
        return answer

    def _run(self, env: dict[str, str], stdin: bytes, command: str, fields: dict[str, str]) -> Answer:
        pod = ("", "")
        if command in _MULTUS_WORDED:
            try:
                pod = cniargs.runtime_pod(env)
                if not all(pod):
                    raise CniError(
                        reasons.INVALID_CNI_ARGS,
                        f"{cniargs.request_label(env)} ERRORED: required CNI variable missing. "
                        f"pod name: {pod[1]}; pod namespace: {pod[0]}",
                        INVALID_ENVIRONMENT,
                    )
            except CniError as err:
                return Answer(400, render_error(err, "").encode(), err.reason)
        try:
            raw = overlay(stdin, self._config)
            merged = json.dumps(raw).encode()
        except CniError:
            raw, merged = {}, stdin  # the core reports the malformed config exactly as thin mode does
        live = command == "ADD" and netconf.fold(raw).get("liveNetworkConfigOnAdd") is True
        view: list[KubeApi | None] = []

        def kube_for(_conf: netconf.NetConf) -> KubeApi | None:
            # The daemon's one client, whatever kubeconfig the shim's config names: that path is
            # the host's, and the daemon has its own identity.
            if not view:
                view.append(self._views.live() if live else self._views.cached())
            return view[0]

        if command == "ADD" and not fields["uid"]:
            self._recover_uid(env, fields, live=live)
        collector = Collector() if self._pod_events is not None else None
        services = self._base(env)._replace(kube_for=kube_for, events=collector)
        outcome = handler.invoke(env, lambda: merged, lambda _env: services)
        after = None
        if collector is not None and collector.events and self._pod_events is not None:
            submit, events = self._pod_events.submit, collector.events
            after = lambda: submit(events)  # noqa: E731
        return _answer(outcome, env, command, pod, after)

    def _recover_uid(self, env: Mapping[str, str], fields: dict[str, str], *, live: bool) -> None:
        """The runtime sent no Pod UID: look it up the way this ADD reads (a bounded live GET when live).

        Only ADD does this; DEL must reach its cached cleanup with no Pod read at all, because
        the Pod is often long gone by then.
        """
        try:
            args = cniargs.parse(env.get("CNI_ARGS", ""))
        except CniError:
            return  # the core names the bad CNI_ARGS
        kube = self._views.live(prefetch=False) if live else self._views.cached()
        if kube is None or not args.known:
            return
        try:
            pod = kube.get_pod(args.namespace, args.name)
        except CniError as err:
            self._log("warning", f"missing pod UID; could not recover it: {err.message}", **fields)
            return
        if pod is not None:
            fields["uid"] = str((pod.get("metadata") or {}).get("uid", ""))


def _answer(
    outcome: Outcome,
    env: Mapping[str, str],
    command: str,
    pod: tuple[str, str],
    after: Callable[[], None] | None,
) -> Answer:
    """The outcome as Multus's daemon answers: 200 with {"Result": ...} (the result as thin mode
    prints it) or an empty body, 400 with the CNI error JSON."""
    err = outcome.error
    if err is None:
        result = outcome.result
        body = b'{"Result":' + render_result(result).encode() + b"}" if result is not None else b""
        return Answer(200, body, "ok", after)
    if command not in _MULTUS_WORDED:
        return Answer(400, render_error(err, outcome.cni_version).encode(), err.reason, after)
    # Multus's daemon words a failed request: the request, then for an ADD the Pod whose
    # networking failed (code and details stay ours).
    doc = err.to_json(outcome.cni_version)
    context = f"error configuring pod [{pod[0]}/{pod[1]}] networking: " if command == "ADD" else ""
    doc["msg"] = f"{cniargs.request_label(env)} ERRORED: {context}{doc.get('msg', '')}"
    return Answer(400, json.dumps(doc, indent=4).encode(), err.reason, after)


def _fields(env: Mapping[str, str]) -> dict[str, str]:
    """Who the request is about, for structured logs; CNI_ARGS is read leniently here."""
    pairs = dict(item.partition("=")[::2] for item in env.get("CNI_ARGS", "").split(";") if "=" in item)
    namespace = pairs.get("K8S_POD_NAMESPACE", "")
    name = pairs.get("K8S_POD_NAME", "")
    return {
        "containerID": env.get("CNI_CONTAINERID", ""),
        "pod": f"{namespace}/{name}" if namespace or name else "",
        "uid": pairs.get("K8S_POD_UID", ""),
        "ifname": env.get("CNI_IFNAME", ""),
    }
