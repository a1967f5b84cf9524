"""Pod Events end to end in-process: what the core records, the thin writer's budget, the daemon's
queue after the reply (issue #18 point 5)."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cni_shim.errors import ApiError, CniError
from cni_shim.kube.eventwriter import ThinEvents
from cni_shim.kube.kubeconfig import Connection
from cni_shim.kube.thin_client import KubeClient
from cni_shim.thick.dispatch import Answer, Dispatcher
from cni_shim.thick.eventqueue import SPAM_BURST, SPAM_REFILL_SECONDS, Collector, EventQueue, SpamFilter
from cni_shim.thick.server import State, listen

NETWORKS = "k8s.v1.cni.cncf.io/networks"


class Sink:
    def __init__(self, fail: Exception | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.fail = fail

    def publish(self, events):
        self.events.extend(events)
        if self.fail is not None:
            raise self.fail

    def settle(self):
        pass


@pytest.fixture
def sink(shim, monkeypatch):
    recorded = Sink()
    base = shim.services
    monkeypatch.setattr(shim, "services", lambda env: base(env)._replace(events=recorded))
    return recorded


def summaries(events):
    return [(e["type"], e["reason"], e["message"]) for e in events]


def test_add_records_one_added_interface_event_naming_every_delegate_on_the_pod(shim, sink):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", {"cniVersion": "1.0.0", "name": "a", "type": "plug-a"})
    out = shim.run("ADD", shim.conf())
    assert out.status == 0, out.stdout
    # One API write per ADD: each interface keeps Multus's text, in delegate order.
    assert summaries(sink.events) == [
        (
            "Normal",
            "AddedInterface",
            "Add eth0 [10.0.0.2/24] from cluster; Add net1 [10.0.0.2/24] from ns1/net-a",
        ),
    ]
    ref = sink.events[0]["involvedObject"]
    assert ref == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": "ns1",
        "name": "pod1",
        "uid": "uid-1",
        "resourceVersion": "1",
    }
    assert {e["source"]["component"] for e in sink.events} == {"multus"}


def test_a_delegate_with_an_empty_result_gets_no_event(shim, sink):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    shim.executor.results["ptp"] = {"dns": {}}
    assert shim.run("ADD", shim.conf()).status == 0
    assert sink.events == []


def test_a_missing_nad_records_no_network_found_and_the_add_still_fails_as_before(shim, sink):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "missing"})
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert summaries(sink.events) == [
        (
            "Warning",
            "NoNetworkFound",
            "cannot find a network-attachment-definition (missing) in namespace (ns1): "
            'network-attachment-definitions.k8s.cni.cncf.io "missing" not found',
        )
    ]
    assert shim.executor.commands() == []


def test_an_informer_view_names_the_listers_not_found(shim, sink):
    shim.kube.pod_reads_live = False
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "missing"})
    assert shim.run("ADD", shim.conf()).status == 1
    assert sink.events[0]["message"].endswith(
        'networkattachmentdefinition.k8s.cni.cncf.io "missing" not found'
    )


def test_events_already_recorded_survive_a_later_delegate_failure(shim, sink):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", {"cniVersion": "1.0.0", "name": "a", "type": "plug-a"})
    shim.executor.failures[("plug-a", "ADD")] = CniError("DelegateFailed", "no VF", 11)
    assert shim.run("ADD", shim.conf()).status == 1
    assert summaries(sink.events) == [("Normal", "AddedInterface", "Add eth0 [10.0.0.2/24] from cluster")]


def test_events_are_handed_over_before_the_status_write_and_only_once(shim, sink):
    """Thin mode writes them beside the status write; a failing status write does not repeat them."""
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    published_at: list[int] = []
    publish = sink.publish

    def publishing(events):
        published_at.append(len(shim.kube.status_writes))
        publish(events)

    sink.publish = publishing
    assert shim.run("ADD", shim.conf()).status == 0
    assert published_at == [0] and len(shim.kube.status_writes) == 1
    shim.kube.conflicts = 99  # every status write fails: the ADD fails after the hand-over
    assert shim.run("ADD", shim.conf(), container_id="c2").status != 0
    assert published_at == [0, 1] and len(sink.events) == 2


def test_pod_events_false_records_nothing(shim, sink):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "missing"})
    assert shim.run("ADD", shim.conf(podEvents=False)).status == 1
    assert shim.run("ADD", shim.conf(podevents=False), container_id="c2").status == 1  # folded like Go
    assert sink.events == []
    assert shim.run("ADD", shim.conf(podEvents="no")).json["msg"].find("podEvents must be a boolean") >= 0


def test_no_pod_means_no_event(shim, sink):
    assert shim.run("ADD", shim.conf()).status == 0  # the placeholder result: the Pod is not there
    shim.kube = None
    assert shim.run("ADD", shim.conf(), container_id="c2").status == 0  # no Kubernetes at all
    assert sink.events == []


def test_a_failing_sink_costs_a_warning_never_the_add(shim, sink):
    sink.fail = ApiError("events are forbidden", 403)
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    out = shim.run("ADD", shim.conf())
    assert out.status == 0
    assert any(
        "could not record the Pod Events: KubeApiRefused: events are forbidden" in m
        for _, m in shim.log.lines
    )


# ---------------------------------------------------------------- thin: ThinEvents and the client


class Poster:
    def __init__(self, clock: list[float], cost: float = 0.0, fail: int = 0) -> None:
        self.posted: list[tuple[str, float]] = []
        self.clock = clock
        self.cost = cost
        self.fail = fail

        self.siblings = 0
        self.closed = 0

    def sibling(self):
        self.siblings += 1
        return self

    def close(self):
        self.closed += 1

    def create_event(self, event, timeout):
        self.posted.append((event["reason"], timeout))
        self.clock[0] += self.cost
        if self.fail:
            raise ApiError("boom", self.fail)


def test_thin_events_share_one_short_budget_on_a_connection_of_their_own():
    now = [0.0]
    poster = Poster(now, cost=0.4)
    thin = ThinEvents(lambda: poster, budget=1.0, timeout=0.5, clock=lambda: now[0])
    thin.publish([{"reason": r} for r in "abcd"])
    with pytest.raises(ApiError, match="1 Event\\(s\\) left unwritten after the 1s budget"):
        thin.settle()
    assert [round(t, 2) for _, t in poster.posted] == [0.5, 0.5, 0.2]
    assert (poster.siblings, poster.closed) == (1, 1)
    thin.settle()  # settled once: nothing left to report
    poster.fail = 403
    thin.publish([{"reason": "x"}])
    with pytest.raises(ApiError, match="boom"):
        thin.settle()


def test_thin_events_without_a_client_write_nothing():
    for client in (lambda: None, object):  # no API at all; a view that cannot write Events
        thin = ThinEvents(client)
        thin.publish([{"reason": "x"}])
        thin.settle()


def test_thin_events_give_up_at_the_budget_while_the_write_hangs():
    gate = threading.Event()

    class Hanging(Poster):
        def create_event(self, event, timeout):
            gate.wait(10)

    thin = ThinEvents(lambda: Hanging([0.0]), budget=0.05)
    thin.publish([{"reason": "x"}])
    with pytest.raises(ApiError, match=r"still unwritten after the 0\.05s budget"):
        thin.settle()
    gate.set()


class _Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, dict[str, Any], float | None]] = []
    status = 201

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.command, self.path, body, self.connection.gettimeout()))
        data = json.dumps({"message": "nope"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def api_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    _Api.seen = []
    _Api.status = 201
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_thin_client_posts_the_event_to_its_namespace_with_the_short_timeout(api_server):
    client = KubeClient(Connection(server=f"http://127.0.0.1:{api_server.server_address[1]}"), timeout=5.0)
    event = {"metadata": {"namespace": "ns 1", "name": "p.1"}, "reason": "AddedInterface"}
    client.create_event(event, 0.25)
    assert _Api.seen[0][:3] == ("POST", "/api/v1/namespaces/ns%201/events", event)
    assert client._sock is not None and client._sock.gettimeout() == 5.0  # restored for the next call
    _Api.status = 409
    client.create_event(event, 0.25)  # already there: fine
    _Api.status = 403
    with pytest.raises(ApiError, match="HTTP 403: nope") as err:
        client.create_event(event, 0.25)
    assert err.value.status == 403
    client.close()


def test_a_sibling_client_writes_on_a_connection_of_its_own(api_server):
    client = KubeClient(Connection(server=f"http://127.0.0.1:{api_server.server_address[1]}"), timeout=5.0)
    event = {"metadata": {"namespace": "ns1", "name": "p.1"}, "reason": "AddedInterface"}
    client.create_event(event, 0.25)
    other = client.sibling()
    other.create_event(event, 0.25)
    assert client._sock is not None and other._sock is not None
    assert client._sock.getsockname() != other._sock.getsockname()
    assert len(_Api.seen) == 2
    other.close()
    client.close()


# ---------------------------------------------------------------- thick: the queue and the reply


class Counts:
    def __init__(self) -> None:
        self.results: list[str] = []

    def pod_event(self, result: str) -> None:
        self.results.append(result)


class ApiPoster:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail_reason = ""

    def post(self, path, body, what):
        self.gate.wait(10)
        if body["reason"] == self.fail_reason:
            raise ApiError("forbidden", 403)
        self.posted.append((path, body["reason"]))
        return 201


def _ev(reason: str, ns: str = "ns1") -> dict[str, Any]:
    return {"metadata": {"namespace": ns}, "reason": reason}


def test_the_queue_writes_in_order_counts_failures_and_drops_when_full():
    api, counts, logged = ApiPoster(), Counts(), []
    api.gate.clear()  # the worker is stuck on its first write
    api.fail_reason = "bad"
    q = EventQueue(api, counts, lambda level, msg, **f: logged.append((level, msg)), size=2).start()
    q.submit([_ev("first")])
    deadline = time.monotonic() + 5
    while q._queue.qsize() and time.monotonic() < deadline:
        pass  # the worker has taken "first" and waits on the gate
    q.submit([_ev("bad"), _ev("second", "ns2"), _ev("overflow")])  # never blocks
    assert counts.results == ["dropped"]
    assert ("warning", "Pod Event queue full; dropped overflow Event") in logged
    api.gate.set()
    q.stop(5)
    assert api.posted == [
        ("/api/v1/namespaces/ns1/events", "first"),
        ("/api/v1/namespaces/ns2/events", "second"),
    ]
    assert counts.results == ["dropped", "written", "failed", "written"]
    assert ("warning", "could not record a bad Event: forbidden") in logged


def _on(pod: str, reason: str = "AddedInterface", uid: str = "u1") -> dict[str, Any]:
    return {
        **_ev(reason),
        "source": {"component": "multus"},
        "involvedObject": {"kind": "Pod", "namespace": "ns1", "name": pod, "uid": uid, "apiVersion": "v1"},
    }


def test_the_spam_filter_allows_a_burst_per_object_then_one_per_refill():
    now = [0.0]
    spam = SpamFilter(lambda: now[0])
    assert [spam.allow(_on("p", reason=f"r{i % 2}")) for i in range(SPAM_BURST + 1)] == [
        True
    ] * SPAM_BURST + [False]
    # Another Pod, or the same name with another UID, has a bucket of its own.
    assert spam.allow(_on("q"))
    assert spam.allow(_on("p", uid="u2"))
    now[0] += SPAM_REFILL_SECONDS * 0.9
    assert not spam.allow(_on("p"))
    now[0] += SPAM_REFILL_SECONDS * 0.2  # one token has come back, and only one
    assert spam.allow(_on("p"))
    assert not spam.allow(_on("p"))
    now[0] += SPAM_REFILL_SECONDS * 1000  # never more than the burst
    assert sum(spam.allow(_on("p")) for _ in range(SPAM_BURST + 5)) == SPAM_BURST


def test_the_spam_filter_forgets_the_least_recently_seen_objects_past_its_size():
    spam = SpamFilter(lambda: 0.0, burst=1, size=2)
    assert spam.allow(_on("a"))
    assert spam.allow(_on("b"))
    assert not spam.allow(_on("a"))  # a is now the most recent
    assert spam.allow(_on("c"))  # b is forgotten
    assert spam.allow(_on("b"))  # with a full bucket again
    assert not spam.allow(_on("c"))


def test_the_queue_writes_no_event_the_spam_filter_holds_back():
    api, counts = ApiPoster(), Counts()
    q = EventQueue(api, counts, lambda *a, **k: None, spam=SpamFilter(lambda: 0.0, burst=2)).start()
    q.submit([_on("p", "first"), _on("p", "second"), _on("p", "third"), _on("q", "other")])
    q.stop(5)
    assert [reason for _, reason in api.posted] == ["first", "second", "other"]
    assert counts.results == ["written", "written", "filtered", "written"]


def test_a_queue_never_started_stops_at_once():
    EventQueue(ApiPoster(), Counts(), lambda *a, **k: None).stop(0.1)


def test_collector_keeps_what_the_core_publishes():
    c = Collector()
    c.publish([_ev("a")])
    c.publish([_ev("b")])
    assert [e["reason"] for e in c.events] == ["a", "b"]


class Submitted:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def submit(self, events):
        self.batches.append([e["reason"] for e in events])


class _Views:
    def __init__(self, kube):
        self.kube = kube

    def live(self, *, prefetch=True):
        return self.kube

    def cached(self):
        return self.kube


class _Requests:
    def request(self, command, result, seconds):
        pass


def _body(conf: dict[str, Any], command: str = "ADD", cid: str = "c1") -> bytes:
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": cid,
        "CNI_NETNS": "/run/netns/t1",
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=uid-1",
        "CNI_PATH": "/opt/cni/bin",
    }
    return json.dumps({"env": env, "config": base64.b64encode(json.dumps(conf).encode()).decode()}).encode()


def test_the_dispatcher_hands_events_over_only_after_the_answer(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "missing"})
    queue = Submitted()
    dispatcher = Dispatcher(
        {},
        _Views(shim.kube),
        _Requests(),
        lambda *a, **k: None,
        base_services=shim.services,
        pod_events=queue,
    )
    failed = dispatcher.serve(_body(shim.conf()))
    assert failed.status == 400
    assert queue.batches == []  # nothing is written while the request runs
    assert failed.after is not None
    failed.after()
    assert queue.batches == [["NoNetworkFound"]]
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    ok = dispatcher.serve(_body(shim.conf(), cid="c2"))
    assert ok.status == 200 and ok.after is not None
    ok.after()
    assert queue.batches[-1] == ["AddedInterface"]
    # Daemon config podEvents=false (it overrides the shim's) and DEL: nothing to hand over.
    dispatcher._config = {"podEvents": False}
    assert dispatcher.serve(_body(shim.conf(), cid="c3")).after is None
    assert dispatcher.serve(_body(shim.conf(), "DEL", "c2")).after is None
    # A daemon without Kubernetes has no queue at all.
    bare = Dispatcher({}, _Views(shim.kube), _Requests(), lambda *a, **k: None, base_services=shim.services)
    assert bare.serve(_body(shim.conf(), cid="c4")).after is None


def test_the_server_runs_after_once_the_reply_is_sent(tmp_path):
    order: list[str] = []

    def serve(body: bytes) -> Answer:
        return Answer(200, b"{}", "ok", lambda: order.append("after"))

    state = State()
    state.ready.set()
    server = listen(str(tmp_path / "sock"), serve, state, None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(tmp_path / "sock" / "cni-shim.sock"))
            s.sendall(b"POST /cni HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}")
            answer = s.makefile("rb").read()
        assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"{}")
        deadline = time.monotonic() + 5
        while not order and time.monotonic() < deadline:
            pass
        assert order == ["after"]
    finally:
        server.shutdown()
        server.server_close()
