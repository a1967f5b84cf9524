"""The daemon's request path in-process: overlay, view choice, UID recovery, per-container locks."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import pytest

from cni_shim.errors import CniError
from cni_shim.node.execution import plugin_failure
from cni_shim.thick.dispatch import Dispatcher, KeyedLocks, decode_request, overlay


class FakeViews:
    """Hands out the harness's FakeKube and records which kind of view each request asked for."""

    def __init__(self, kube) -> None:
        self.kube = kube
        self.asked: list[str] = []

    def live(self, *, prefetch=True):
        self.asked.append("live" if prefetch else "live, Pod only")
        return self.kube

    def cached(self):
        self.asked.append("cached")
        return self.kube


class Events:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def request(self, command: str, result: str, seconds: float) -> None:
        assert seconds >= 0
        self.requests.append((command, result))


def body(env: dict[str, str], conf: dict[str, Any] | bytes) -> bytes:
    raw = conf if isinstance(conf, bytes) else json.dumps(conf).encode()
    return json.dumps({"env": env, "config": base64.b64encode(raw).decode()}).encode()


def env_for(
    command: str,
    cid: str = "c1",
    args: str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=uid-1",
):
    return {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": cid,
        "CNI_NETNS": "/run/netns/t1",
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": args,
        "CNI_PATH": "/opt/cni/bin",
    }


@pytest.fixture
def rig(shim):
    assert shim.kube is not None
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    views = FakeViews(shim.kube)
    events = Events()
    logged: list[tuple[str, str, dict[str, Any]]] = []
    dispatcher = Dispatcher(
        {"liveNetworkConfigOnAdd": True},
        views,
        events,
        lambda level, msg, **f: logged.append((level, msg, f)),
        base_services=shim.services,
    )
    return dispatcher, views, events, logged


def test_overlay_lets_every_daemon_key_win():
    merged = overlay(b'{"cniVersion":"0.3.1","name":"n","logLevel":"debug"}', {"cniVersion": "1.0.0", "x": 1})
    assert merged == {"cniVersion": "1.0.0", "name": "n", "logLevel": "debug", "x": 1}


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json", "not valid"),
        (b'{"env": {"CNI_COMMAND": 1}}', "strings"),
        (b'{"env": {}}', "CNI_COMMAND"),
        (b'{"env": {"CNI_COMMAND": "ADD"}, "config": "***"}', "not valid"),
    ],
)
def test_a_malformed_request_is_a_named_error(raw, why):
    with pytest.raises(CniError) as err:
        decode_request(raw)
    assert err.value.reason == "MalformedDaemonRequest"
    assert why in err.value.message


def test_add_answers_in_the_multus_shape_and_the_same_bytes_thin_mode_prints(rig, shim):
    dispatcher, views, events, logged = rig
    answer = dispatcher.serve(body(env_for("ADD"), shim.conf()))
    assert answer.status == 200
    result = json.loads(answer.body)["Result"]
    thin = shim.run("DEL", shim.conf())  # undo, then compare with a thin ADD of the same request
    assert thin.status == 0
    assert shim.run("ADD", shim.conf()).json == result
    assert views.asked == ["live"]
    assert events.requests == [("ADD", "ok")]
    assert logged[0][0] == "info"
    assert logged[0][2] == {
        "containerID": "c1",
        "pod": "ns1/pod1",
        "uid": "uid-1",
        "ifname": "eth0",
        "seconds": logged[0][2]["seconds"],
    }


def test_live_reads_off_and_other_verbs_use_the_shared_caches(rig, shim):
    dispatcher, views, _events, _ = rig
    dispatcher._config = {"liveNetworkConfigOnAdd": False}
    assert dispatcher.serve(body(env_for("ADD"), shim.conf())).status == 200
    assert views.asked == ["cached"]


def test_add_without_a_uid_recovers_it_through_its_own_view(rig, shim):
    dispatcher, views, _, logged = rig
    args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1"
    assert dispatcher.serve(body(env_for("ADD", args=args), shim.conf())).status == 200
    assert views.asked == ["live, Pod only", "live"]  # the recovery reads only the Pod, then the core's view
    assert logged[-1][2]["uid"] == "uid-1"


def test_del_without_a_uid_from_the_cache_asks_for_no_view_at_all(rig, shim):
    dispatcher, views, _events, _ = rig
    assert dispatcher.serve(body(env_for("ADD"), shim.conf())).status == 200
    shim.kube.pods.clear()
    shim.kube.reads.clear()
    views.asked.clear()
    args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1"
    answer = dispatcher.serve(body(env_for("DEL", args=args), shim.conf()))
    assert (answer.status, answer.body) == (200, b"")
    assert views.asked == []
    assert shim.kube.reads == []
    assert [c for c in shim.executor.commands() if c[1] == "DEL"] == [("ptp", "DEL", "eth0")]


def test_errors_are_the_thin_mode_error_json_with_the_reason_counted(rig, shim):
    dispatcher, _, events, logged = rig
    answer = dispatcher.serve(body(env_for("ADD"), b"{"))
    assert answer.status == 400
    doc = json.loads(answer.body)
    assert doc["code"] == 6
    assert doc["details"] == "MalformedNetworkConfig"
    assert events.requests == [("ADD", "MalformedNetworkConfig")]
    assert logged[-1][0] == "error"


def test_a_failed_container_request_leads_with_the_request_as_multus_daemon_words_it(rig, shim):
    dispatcher, _, _, _ = rig
    request = (
        'ContainerID:"c1" Netns:"/run/netns/t1" IfName:"eth0" '
        'Args:"IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=uid-1" Path:""'
    )
    add = json.loads(dispatcher.serve(body(env_for("ADD"), b"{")).body)
    thin = shim.run("ADD", b"{").json
    assert add["msg"] == f"{request} ERRORED: error configuring pod [ns1/pod1] networking: {thin['msg']}"
    assert (add["code"], add["details"]) == (thin["code"], thin["details"])
    check = json.loads(dispatcher.serve(body(env_for("CHECK"), b"{")).body)
    assert check["msg"] == f"{request} ERRORED: {thin['msg']}"
    # STATUS and GC are about no container: the core's error as it is.
    status = json.loads(dispatcher.serve(body(env_for("STATUS"), b"{")).body)
    assert status["msg"] == thin["msg"]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ("", "could not extract the kubernetes runtime args: invalid CNI_ARG ''"),
        (
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1",
            "could not extract the kubernetes runtime args: missing K8S_POD_NAME",
        ),
        ("K8S_POD_NAME=pod1", "could not extract the kubernetes runtime args: missing K8S_POD_NAMESPACE"),
        (
            "K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=a=b",
            "could not extract the kubernetes runtime args: invalid CNI_ARG 'K8S_POD_NAME=a=b'",
        ),
        (
            "K8S_POD_NAMESPACE= ;K8S_POD_NAME=pod1",
            'ContainerID:"c1" Netns:"/run/netns/t1" IfName:"eth0" Args:"K8S_POD_NAMESPACE= ;K8S_POD_NAME=pod1" '
            'Path:"" ERRORED: required CNI variable missing. pod name: pod1; pod namespace: ',
        ),
    ],
)
def test_add_and_check_need_cni_args_naming_the_pod_before_anything_runs(rig, shim, args, why):
    dispatcher, _, _, _ = rig
    for command in ("ADD", "CHECK"):
        answer = dispatcher.serve(body(env_for(command, args=args), shim.conf()))
        assert answer.status == 400
        doc = json.loads(answer.body)
        assert (doc["msg"], doc["code"], doc["details"]) == (why, 4, "InvalidCniArgs")
    assert shim.executor.commands() == []


def test_a_request_without_cni_args_is_refused_with_its_env_shown():
    from cni_shim.core import cniargs  # noqa: PLC0415

    with pytest.raises(CniError) as err:
        cniargs.runtime_pod({"CNI_COMMAND": "ADD", "B": "2"})
    assert (
        err.value.message
        == "could not extract the kubernetes runtime args: missing CNI_ARGS: 'map[B:2 CNI_COMMAND:ADD]'"
    )


def test_same_container_requests_are_serialized_and_others_run_in_parallel():
    locks = KeyedLocks()
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def first() -> None:
        with locks.hold("a"):
            inside.set()
            release.wait(10)
            order.append("first")

    def second_same() -> None:
        with locks.hold("a"):
            order.append("same")

    holder = threading.Thread(target=first)
    holder.start()
    assert inside.wait(10)
    waiter = threading.Thread(target=second_same)
    waiter.start()
    # Another container proceeds while "a" is held ...
    with locks.hold("b"):
        order.append("other")
    # ... while the second "a" request cannot get in: given time, it still waits.
    waiter.join(0.3)
    assert waiter.is_alive()
    assert order == ["other"]
    release.set()
    holder.join(10)
    waiter.join(10)
    assert order == ["other", "first", "same"]
    assert len(locks) == 0  # slots vanish once nobody holds or awaits them


def test_the_dispatcher_serializes_one_container_and_lets_another_through(rig, shim):
    dispatcher, _, _, _ = rig
    entered = threading.Event()
    release = threading.Event()
    adds: list[str] = []

    def on_call(plugin: str, command: str) -> None:
        if command == "ADD":
            cid = threading.current_thread().name
            adds.append(cid)
            if cid == "a-first":
                entered.set()
                release.wait(10)

    shim.executor.on_call = on_call
    answers: dict[str, int] = {}

    def serve(name: str, cid: str) -> threading.Thread:
        def go() -> None:
            answers[name] = dispatcher.serve(body(env_for("ADD", cid=cid), shim.conf())).status

        thread = threading.Thread(target=go, name=name)
        thread.start()
        return thread

    first = serve("a-first", "a")
    assert entered.wait(10)
    second = serve("a-second", "a")
    other = serve("b-other", "b")
    other.join(10)
    assert answers == {"b-other": 200}  # another container finished while "a" was busy
    second.join(0.3)
    assert second.is_alive()  # the same container waits for the first request
    release.set()
    first.join(10)
    second.join(10)
    assert adds == ["a-first", "b-other", "a-second"]
    assert answers == {"b-other": 200, "a-first": 200, "a-second": 200}


def test_status_and_gc_need_no_container_and_take_no_lock(rig, shim):
    dispatcher, views, events, _ = rig
    conf = shim.conf(
        cniVersion="1.1.0", delegates=[{"cniVersion": "1.1.0", "name": "cluster", "type": "ptp"}]
    )
    for command in ("STATUS", "GC"):
        env = {"CNI_COMMAND": command, "CNI_PATH": "/opt/cni/bin"}
        answer = dispatcher.serve(body(env, conf))
        assert (answer.status, answer.body) == (200, b"")
    assert events.requests == [("STATUS", "ok"), ("GC", "ok")]
    assert [c[:2] for c in shim.executor.commands()] == [("ptp", "STATUS"), ("ptp", "GC")]
    assert views.asked == []
    assert len(dispatcher.locks) == 0


def test_a_delegates_own_error_is_answered_as_printed_and_counted_as_a_delegate_failure(rig, shim):
    """The answer is written from the CniError itself: the reason counted is the error's, not a
    word read back out of the delegate's details."""
    dispatcher, _, events, _ = rig
    conf = shim.conf(
        cniVersion="1.1.0", delegates=[{"cniVersion": "1.1.0", "name": "cluster", "type": "ptp"}]
    )
    shim.executor.failures[("ptp", "STATUS")] = plugin_failure(
        "ptp", 1, b'{"code": 50, "msg": "not ready", "details": "Busy: the agent restarts"}', b""
    )
    answer = dispatcher.serve(body({"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}, conf))
    assert answer.status == 400
    assert answer.body == shim.run("STATUS", conf).stdout.encode()
    assert json.loads(answer.body)["details"] == "Busy: the agent restarts"
    assert events.requests == [("STATUS", "DelegateFailed")]
