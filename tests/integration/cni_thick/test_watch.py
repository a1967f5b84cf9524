"""The daemon's informers follow a real watch stream: a change arrives as an event, not by relisting."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from cni_shim.kube.daemon_client import ApiServer
from cni_shim.kube.paths import NAD_GROUP_PATH
from testbed.cni_objects import create_nad

pytestmark = pytest.mark.integration


def test_a_watch_yields_the_event_of_a_nad_created_after_it_started(testbed, k8s_namespace):
    api = ApiServer.connect(str(testbed.kubeconfig_for("admin")))
    path = f"{NAD_GROUP_PATH}/namespaces/{k8s_namespace}/network-attachment-definitions"
    version = api.list(path, [])["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []
    failure: list[BaseException] = []

    def follow() -> None:
        try:
            for event in api.watch(path, [("resourceVersion", version), ("timeoutSeconds", "30")], 40):
                events.append(event)
                return
        except BaseException as exc:  # the assertion below reports it
            failure.append(exc)

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    config = json.dumps({"cniVersion": "1.0.0", "name": "w", "type": "ptp"})
    create_nad(
        testbed.api_client, k8s_namespace, {"metadata": {"name": "watched"}, "spec": {"config": config}}
    )
    watcher.join(40)
    assert failure == []
    ((event,),) = (events,)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "watched")
