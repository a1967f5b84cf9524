"""The shim's CNI verbs: one request in, a result or a CniError out, one module per verb.

Thin mode (cni_shim.main) and thick mode (cni_shim.thick.dispatch) share this; each supplies the
adapters in Services. All Kubernetes reads are live; DEL, CHECK and GC work from the saved plan
(cni_shim.handler.replay) and make no Pod or NAD read unless it is missing (Multus's fallback).
A verb's module is imported only when a request needs it: a thin DEL never loads what builds
delegates.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from cni_shim import reasons
from cni_shim.core import cniargs, netconf, protocol
from cni_shim.core.netconf import NetConf
from cni_shim.errors import IO_FAILURE, CniError
from cni_shim.handler.context import Context
from sriov_lib import quickjson
from sriov_lib.fanout import run as run_at_once
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.ports import (
        CacheStore,
        Clock,
        ConfFiles,
        DeviceInfoFiles,
        EventSink,
        Executor,
        Fanout,
        KubeApi,
        Log,
        NodeDevices,
        PodResources,
        Routes,
    )

    Json = dict[str, Any]


def stat_netns(path: str) -> str | None:
    """Why CNI_NETNS cannot be the Pod's netns (Go's ns.GetNS wording), None when it exists: one stat."""
    try:
        os.stat(path)
    except OSError as exc:
        return f'failed to Statfs "{path}": {(exc.strerror or str(exc)).lower()}'
    return None


class Services(TypedTuple):
    """The adapters a mode plugs in; factories take the decoded config because it names dirs and kubeconfig."""

    executor: Executor
    store_for: Callable[[str], CacheStore]
    kube_for: Callable[[NetConf], KubeApi | None]
    log_for: Callable[[NetConf], Log]
    clock: Clock
    delegate_env: Mapping[str, str]
    routes: Routes
    # confDir and clusterNetwork files (the delegates those name).
    conf_files: ConfFiles
    # Checks the ADD's CNI_NETNS before the first delegate runs (Multus's validateIfName).
    netns_problem: Callable[[str], str | None] = stat_netns
    # Pod Events (AddedInterface, NoNetworkFound); None writes none whatever the config says.
    events: EventSink | None = None
    # What asks delegates for their VERSION, given cniDir (thin mode keeps the answers there);
    # None: `executor` itself (the daemon's remembers them in memory).
    versions_for: Callable[[str], Executor] | None = None
    # The node's VFs and device-plugin allocations (cni_shim.handler.devicegate), built only when a
    # Pod's network names a device; None: a node without SR-IOV, where no name is a VF.
    devices_for: Callable[[NetConf], NodeDevices] | None = None
    # The kubelet's device-plugin allocations (cni_shim.handler.resourcelookup), built only when a
    # selected NAD carries a resourceName; None: no lookup, no delegate gets a device from it.
    pod_resources_for: Callable[[NetConf], PodResources] | None = None
    # Device-info files (cni_shim.handler.devinfo): a managed shadow's and a copy of a device
    # plugin's written before ADD, read into network-status, removed on DEL; None: none.
    device_info_files: DeviceInfoFiles | None = None
    # Runs one wave of delegates (cni_shim.core.delegatewaves) at once; tests plug in an order.
    fanout: Fanout = run_at_once


def handle(req: protocol.Request, svc: Services) -> Json | None:
    """Run one already environment-checked request; returns the ADD result in the caller's version.

    A failure's msg is Multus's wording; its stable reason goes into the error's details and,
    here, into the log line (the config names the log, so a config that fails to load logs nothing).
    """
    try:
        return _handle(req, svc)
    except CniError as exc:
        try:
            log = svc.log_for(netconf.load(netconf.fold(netconf.decode_object(req.stdin))))
        except CniError:
            raise exc from None
        log.error(f"{req.command} failed: {exc.reason} (code {exc.code}): {exc.message}")
        raise


def _handle(req: protocol.Request, svc: Services) -> Json | None:
    raw = netconf.fold(netconf.decode_object(req.stdin))
    version = protocol.check_config(req.command, raw)
    try:
        conf = netconf.load(raw)
    except CniError as exc:
        if req.command in ("DEL", "CHECK"):
            raise  # Multus's DEL and CHECK return the loader's error as it is
        raise exc.wrap("Multus: error loading netconf: ") from exc
    pod_args = cniargs.parse(req.args) if req.command in ("ADD", "DEL", "CHECK") else cniargs.PodArgs()
    ctx = Context(req, conf, version, pod_args, svc, svc.store_for(conf.cni_dir), svc.log_for(conf), [])
    return _run_verb(ctx)


def _run_verb(ctx: Context) -> Json | None:
    # Each verb imports its own module when it runs, so a DEL never pays for an ADD's imports.
    command = ctx.req.command
    if command == "ADD":
        from cni_shim.handler.add import add  # noqa: PLC0415

        try:
            return add(ctx)
        finally:
            ctx.publish_events()  # a failed ADD's Events (a successful one has handed its own over)
            ctx.settle_events()
    if command == "DEL":
        from cni_shim.handler.delete import delete  # noqa: PLC0415

        delete(ctx)
    elif command == "CHECK":
        from cni_shim.handler.check import check  # noqa: PLC0415

        check(ctx)
    elif command == "STATUS":
        from cni_shim.handler.status import status  # noqa: PLC0415

        status(ctx)
    elif command == "GC":
        from cni_shim.handler.gc import gc  # noqa: PLC0415

        gc(ctx)
    return None


def _cni_version(stdin: bytes) -> str:
    try:
        value = quickjson.loads(stdin).get("cniVersion", "")
    except (ValueError, AttributeError, RecursionError):
        return ""
    return value if isinstance(value, str) else ""


def invoke(
    env: dict[str, str], read_stdin: Callable[[], bytes], services: Callable[[dict[str, str]], Services]
) -> protocol.Outcome:
    """One request from the runtime's environment and stdin: its result or its CniError.

    Never raises: the runtime must get CNI error JSON, never a traceback. Thin mode calls this
    from the executable and prints the outcome, thick mode from the daemon's /cni handler and
    answers it over HTTP, so both answer byte for byte alike (cni_shim.core.protocol.render).
    `services` builds the adapters once the environment is valid.
    """
    req = protocol.Request.from_env(env, b"")
    stdin = b""
    try:
        protocol.check_environment(req)
        try:
            stdin = read_stdin()
        except OSError as exc:
            raise CniError(reasons.STDIN_UNREADABLE, f"error reading from stdin: {exc}", IO_FAILURE) from exc
        req = protocol.Request.from_env(env, stdin)
        result = handle(req, services(env))
    except CniError as err:
        return protocol.Outcome(error=err, cni_version=_cni_version(stdin))
    except Exception as exc:
        internal = CniError(
            reasons.INTERNAL_ERROR, f"cni-shim failed unexpectedly: {type(exc).__name__}: {exc}"
        )
        return protocol.Outcome(error=internal, cni_version=_cni_version(stdin))
    return protocol.Outcome(result=result)
