"""Runs one compat case through real Multus and through cni-shim, and says how they differ.

Both implementations get the same bin dir (recorder delegates, real plugins), the same network
namespace, the same Pod and NAD objects on the bed's API server, the same container ID and the
same stdin; only their own type, cache dir and identity differ. What each side did is gathered
into an observation (per step: exit status, result or error code and msg, the delegate calls the
recorder logged, the Pod's network-status, whether a delegate cache file exists, and for some
cases the Pod's Events or the daemon's generated config) and the two observations are compared
after normalising what legitimately differs (see :func:`normalise`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bench.common import end_process, multus_daemon_process, network_namespace
from bench.thick_compare import MULTUS_RULES, multus_identity
from cni_shim import launcher
from testbed.bed import TestBed
from testbed.cni_daemon import DAEMON, DaemonProc
from testbed.nodecni import make_cni_bin_dir
from testbed.tools import ToolSet
from testbed.waiting import wait_for
from tests.compat.model import THIN, Case, Step

MULTUS = "multus"
OURS = "cni-shim"
SIDES = (MULTUS, OURS)
NETWORKS = "k8s.v1.cni.cncf.io/networks"
NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"
NAD_API = ("k8s.cni.cncf.io", "v1", "network-attachment-definitions")
POD_NAME = "workload"
# The variables a delegate's behaviour depends on; the rest of its env is the runner's own.
DELEGATE_ENV = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH")
EVENT_REASONS = ("AddedInterface", "NoNetworkFound")
# Multus thin sends Events from a goroutine the process may not wait for, thick after the reply:
# a case that compares Events polls up to this long for them to land and settle.
EVENT_WAIT = 5.0
EVENT_SETTLE = 1.0
CALL_TIMEOUT = 90.0
UNTYPED_CODE = 999  # Go's skel for an error that is not a *types.Error
WELL_KNOWN_CODES = range(1, 100)  # the CNI spec reserves 1-99 for its well-known errors
DAEMON_CNI_VERSION = "1.0.0"


def fill(value: Any, ctx: Mapping[str, str]) -> Any:
    """``value`` with every ``{placeholder}`` of ``ctx`` replaced, in strings at any depth."""
    if isinstance(value, str):
        for key, sub in ctx.items():
            value = value.replace("{" + key + "}", sub)
        return value
    if isinstance(value, dict):
        return {k: fill(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ctx) for v in value]
    return value


@dataclass
class Prepared:
    """A case's objects on the API server (created before any side runs)."""

    namespace: str
    other: str
    work: Path
    uid: str = ""


@dataclass
class Daemons:
    multus_socket_dir: Path
    ours: DaemonProc
    multus_cni_dir: Path
    ours_cni_dir: Path


class World:
    """One bed, one bin dir, one netns and (when a thick case runs) one daemon pair per session."""

    def __init__(self, bed: TestBed, tools: ToolSet, root: Path, stack: ExitStack) -> None:
        self.bed = bed
        self.tools = tools
        self.root = root
        self.stack = stack
        self.api = bed.api_client
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.multus_dir = tools.require("multus")
        self.bin_dir = make_cni_bin_dir(root / "bin", tools)
        # The -S launcher a node installs, as bench/thick_compare.py uses: the console script's
        # site import would dominate every call's cost.
        launcher.install(self.bin_dir / OURS)
        for name in ("multus", "multus-shim"):
            shutil.copy(self.multus_dir / name, self.bin_dir / name)
        self.netns = stack.enter_context(network_namespace())
        tag = secrets.token_hex(2)
        # Both thin sides get Multus's rights (events included), so an Events fix needs no RBAC change.
        self.kubeconfigs = {side: self._identity(f"compat-{side}-{tag}", MULTUS_RULES) for side in SIDES}
        self.prepared: dict[str, Prepared] = {}
        stack.callback(self._remove_namespaces)
        self._daemons: Daemons | None = None
        self._daemon_error: str | None = None

    def _identity(self, user: str, rules: list[dict[str, Any]]) -> Path:
        path = self.bed.issue_identity(user, user)
        self.bed.grant(user, rules)
        return Path(path)

    # ------------------------------------------------------------------ API objects

    def prepare(self, cases: Sequence[Case]) -> None:
        """Namespaces, NADs and Pods of every case, created up front in one go.

        Multus's daemon reads NADs from its informer without a retry, so a NAD created just
        before a thick ADD may not be visible to it yet. The daemon pair starts only after this
        (at the first thick case), so the informers' initial list already holds every object.
        """
        todo = [c for c in cases if c.id not in self.prepared and c.kube]
        if not todo:
            return
        for case in todo:
            tag = secrets.token_hex(2)
            stem = re.sub(r"[^a-z0-9-]", "-", case.id.lower())[:40].strip("-")
            prepared = Prepared(f"cx-{stem}-{tag}", f"cx-{stem}-{tag}-o", self.root / "cases" / case.id)
            prepared.work.mkdir(parents=True, exist_ok=True)
            self.prepared[case.id] = prepared
            for ns in (prepared.namespace, prepared.other):
                self.core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": ns}}))
        for case in todo:
            prepared = self.prepared[case.id]
            self._wait_for_service_account(prepared.namespace)
            ctx = self.context(case, prepared)
            for name, config in case.nads.items():
                self.create_nad(prepared.namespace, name, config, case.nad_annotations.get(name, {}), ctx)
            for name, config in case.other_nads.items():
                self.create_nad(prepared.other, name, config, {}, ctx)
            if case.pod is not None and not any(s.pod_after for s in case.steps):
                prepared.uid = self.create_pod(case, prepared)

    def _remove_namespaces(self) -> None:
        """Every case's Pod (at once: no kubelet confirms a graceful delete) and namespaces."""
        for prepared in self.prepared.values():
            self.delete_pod(prepared.namespace)
            for ns in (prepared.namespace, prepared.other):
                with contextlib.suppress(ApiException):
                    self.core.delete_namespace(ns)

    def _wait_for_service_account(self, ns: str) -> None:
        """The API server refuses Pods until the serviceaccount controller made the default account."""

        def exists() -> Any:
            return self.core.read_namespaced_service_account("default", ns)

        wait_for(exists, 30.0, what=f"ServiceAccount {ns}/default", ignore=(ApiException,))

    def create_nad(
        self, ns: str, name: str, config: Any, annotations: Mapping[str, str], ctx: Mapping[str, str]
    ) -> None:
        text = config if isinstance(config, str) else json.dumps(config)
        body = {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "annotations": dict(annotations)},
            "spec": {"config": fill(text, ctx)},
        }
        self.custom.create_namespaced_custom_object(*NAD_API[:2], ns, NAD_API[2], body)

    def create_pod(self, case: Case, prepared: Prepared) -> str:
        ctx = self.context(case, prepared)
        body = {
            "metadata": {"name": POD_NAME, "annotations": fill(dict(case.pod or {}), ctx)},
            "spec": {
                "nodeName": self.bed.node_name,
                "containers": [{"name": "main", "image": "registry.invalid/none:0"}],
            },
        }
        pod = self.core.create_namespaced_pod(prepared.namespace, client.V1Pod.model_validate(body))
        assert pod.metadata is not None
        return str(pod.metadata.uid)

    def delete_pod(self, ns: str) -> None:
        """Delete the Pod at once (no kubelet would ever confirm a graceful delete) and wait."""
        try:
            self.core.delete_namespaced_pod(POD_NAME, ns, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise

        def gone() -> bool:
            try:
                self.core.read_namespaced_pod(POD_NAME, ns)
            except ApiException as exc:
                return bool(exc.status == 404)
            return False

        wait_for(gone, 30.0, what=f"Pod {ns}/{POD_NAME} to be deleted")

    def reset_pod(self, case: Case, prepared: Prepared) -> None:
        """The Pod as the case created it: network-status gone (or the Pod back after a delete)."""
        if case.pod is None:
            return
        annotations: dict[str, Any] = {
            **fill(dict(case.pod), self.context(case, prepared)),
            NETWORK_STATUS: None,
        }
        try:
            self.core.patch_namespaced_pod(
                POD_NAME, prepared.namespace, {"metadata": {"annotations": annotations}}
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            if not any(s.pod_after for s in case.steps):
                prepared.uid = self.create_pod(case, prepared)

    def pod_network_status(self, ns: str) -> Any:
        try:
            pod = self.core.read_namespaced_pod(POD_NAME, ns)
        except ApiException as exc:
            if exc.status == 404:
                return "<no pod>"
            raise
        text = ((pod.metadata and pod.metadata.annotations) or {}).get(NETWORK_STATUS)
        return json.loads(text) if text else None

    def pod_events(self, ns: str, *, wait: bool) -> list[list[str]]:
        """(type, reason, message) of the Pod's Multus Events; with ``wait``, polls up to
        EVENT_WAIT until some have landed and no more arrived for EVENT_SETTLE (both daemons
        write them one by one after the reply; one that writes none costs the full wait)."""
        start = time.monotonic()
        deadline = start + (EVENT_WAIT if wait else 0)
        found: list[list[str]] = []
        changed = start
        while True:
            now = sorted(
                [str(e.type), str(e.reason), str(e.message)]
                for e in self.core.list_namespaced_event(ns).items
                if e.reason in EVENT_REASONS and e.involved_object.name == POD_NAME
            )
            if now != found:
                found, changed = now, time.monotonic()
            settled = bool(found) and time.monotonic() - changed >= EVENT_SETTLE
            if not wait or settled or time.monotonic() >= deadline:
                return found
            time.sleep(0.1)

    def clear_events(self, ns: str) -> None:
        self.core.delete_collection_namespaced_event(ns)
        wait_for(lambda: not self.pod_events(ns, wait=False), 10.0, what=f"Events of {ns} deleted")

    def context(self, case: Case, prepared: Prepared | None, work: Path | None = None) -> dict[str, str]:
        work = prepared.work if prepared else (work or self.root / "cases" / case.id)
        return {
            "log": str(work / "calls.jsonl"),
            "work": str(work),
            "confdir": str(work / "confdir"),
            "ns": prepared.namespace if prepared else "",
            "other": prepared.other if prepared else "",
            "netns": self.netns,
            "cid": "cid-" + re.sub(r"[^a-zA-Z0-9_.-]", "-", case.id),
            "uid": prepared.uid if prepared else "",
            "bin": str(self.bin_dir),
        }

    # ------------------------------------------------------------------ daemons

    def daemons(self) -> Daemons:
        if self._daemon_error is not None:
            raise AssertionError(f"the daemon pair did not start: {self._daemon_error}")
        if self._daemons is None:
            try:
                self._daemons = self._start_daemons()
            except Exception as exc:
                self._daemon_error = str(exc)  # one start attempt per session, not one per case
                raise
        return self._daemons

    def _start_daemons(self) -> Daemons:
        work = self.root / "daemons"
        work.mkdir()
        bootstrap, cert_dir = multus_identity(self.bed, work)
        socket_dir = work / "multus-sock"
        auto_dir = work / "multus-auto"
        auto_dir.mkdir()
        # multus-daemon v4.2 returns from main at once unless multusConfigFile is "auto", so it
        # gets a primary network to find; the file it generates is not used by any case here.
        (auto_dir / "10-primary.conf").write_text(
            json.dumps({"cniVersion": "1.0.0", "name": "primary", "type": "recorder"})
        )
        multus_cni_dir = work / "multus-cache"
        # Every key here also overlays each request's config (both daemons do that), so only
        # keys the core ignores or that the other daemon's config sets alike are used.
        # multus-daemon refuses "auto" without a cniVersion, so both daemons carry the same one
        # (a thick case therefore runs at 1.0.0 whatever its shim config says, as in Multus).
        config = {
            "cniVersion": DAEMON_CNI_VERSION,
            "socketDir": str(socket_dir),
            "cniConfigDir": str(work / "multus-net.d"),
            "multusConfigFile": "auto",
            "multusAutoconfigDir": str(auto_dir),
            "cniDir": str(multus_cni_dir),
            "logToStderr": True,
            "logLevel": "error",
            "perNodeCertificate": {
                "enabled": True,
                "bootstrapKubeconfig": str(bootstrap),
                "certDir": str(cert_dir),
                "certDuration": "24h",
            },
        }
        (work / "multus-net.d").mkdir()
        path = work / "multus-daemon-config.json"
        path.write_text(json.dumps(config))
        # Not bench.thick_compare.multus_daemon: it writes its delegates into the daemon config,
        # and the overlay would push them into every case's config.
        self.stack.enter_context(
            multus_daemon_process(
                self.multus_dir, path, socket_dir, work / "multus-daemon.log", self.bed.node_name
            )
        )
        ours_dir = work / "ours"
        ours_dir.mkdir()
        ours_cni_dir = ours_dir / "cache"
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        env["NODE_NAME"] = self.bed.node_name
        ours_user = f"compat-ours-daemon-{secrets.token_hex(2)}"
        ours = DaemonProc(
            ours_dir,
            {
                "cniVersion": DAEMON_CNI_VERSION,
                "cniDir": str(ours_cni_dir),
                "kubeconfig": str(self._identity(ours_user, MULTUS_RULES)),
            },
            env,
        ).start()
        self.stack.callback(ours.cleanup)
        self.stack.callback(ours.stop)
        return Daemons(socket_dir, ours, multus_cni_dir, ours_cni_dir)


# ---------------------------------------------------------------------- running one side


@dataclass
class Observation:
    steps: list[dict[str, Any]] = field(default_factory=list)


def run_side(world: World, case: Case, mode: str, side: str) -> Observation:
    """Run every step of ``case`` through one implementation in one mode."""
    prepared = world.prepared.get(case.id)
    work = prepared.work if prepared else world.root / "cases" / case.id / mode
    if prepared is None:
        work.mkdir(parents=True, exist_ok=True)
    ctx = world.context(case, prepared, work)
    log = Path(ctx["log"])
    log.unlink(missing_ok=True)
    for rel, content in case.files.items():
        target = work / fill(rel, ctx)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(fill(content, ctx))
    (work / "confdir").mkdir(exist_ok=True)
    cni_dir = _cni_dir(world, mode, side, work)
    if mode == THIN:
        shutil.rmtree(cni_dir, ignore_errors=True)
    conf = _conf(world, case, mode, side, cni_dir, ctx)
    binary = world.bin_dir / (side if mode == THIN else ("multus-shim" if side == MULTUS else OURS))
    checkpoint = work / "varlib" / "kubelet" / "device-plugins" / "kubelet_internal_checkpoint"
    if case.kubelet_checkpoint is not None:
        assert mode == THIN, "the daemons read the machine's own kubelet paths"
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        if side == MULTUS:
            binary = _in_private_varlib(binary, work / "varlib", work / "multus-in-varlib")
        else:
            conf["deviceCheckpointFile"] = str(checkpoint)
            conf["podResourcesSocket"] = str(work / "no-pod-resources.sock")
    obs = Observation()
    for step in case.steps:
        if step.action == "delete-pod":
            assert prepared is not None
            world.delete_pod(prepared.namespace)
            obs.steps.append({"action": step.action})
            continue
        if step.action == "annotate":
            assert prepared is not None
            patch = {"metadata": {"annotations": fill(dict(step.annotations or {}), ctx)}}
            world.core.patch_namespaced_pod(POD_NAME, prepared.namespace, patch)
            obs.steps.append({"action": step.action})
            continue
        ctx = world.context(case, prepared, work)  # the UID changes when a step recreates the Pod
        if case.kubelet_checkpoint:
            checkpoint.write_text(fill(case.kubelet_checkpoint, ctx))
        obs.steps.append(_run_step(world, case, step, binary, conf, cni_dir, ctx, prepared))
    replacements = {str(cni_dir): "<cniDir>", str(world.bin_dir): "<bin>"}
    if case.kubelet_checkpoint is not None and side == OURS:
        replacements[str(checkpoint)] = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
    if mode != THIN:
        # A thick error's msg quotes the shim's stdin, which names that side's socket and type.
        replacements[str(conf["daemonSocketDir"])] = "<socketDir>"
        replacements[f'"type": "{conf["type"]}"'] = '"type": "<shim>"'
    if prepared is not None and prepared.uid:
        replacements[prepared.uid] = "<uid>"
    return Observation([normalise(s, replacements) for s in obs.steps])


def _in_private_varlib(binary: Path, varlib: Path, wrapper: Path) -> Path:
    """``binary`` run in a private mount namespace with ``varlib`` on /var/lib (stdin, env and
    exit status its own): Multus's kubelet paths without touching the machine's."""
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec unshare --mount --propagation private sh -c 'mount --bind {varlib} /var/lib && exec {binary}'\n"
    )
    wrapper.chmod(0o755)
    return wrapper


def _cni_dir(world: World, mode: str, side: str, work: Path) -> Path:
    if mode == THIN:
        return work / f"cache-{side}"
    d = world.daemons()
    return d.multus_cni_dir if side == MULTUS else d.ours_cni_dir


def _conf(
    world: World, case: Case, mode: str, side: str, cni_dir: Path, ctx: Mapping[str, str]
) -> dict[str, Any]:
    conf: dict[str, Any] = {"binDir": str(world.bin_dir), "confDir": ctx["confdir"], **fill(case.conf, ctx)}
    if mode == THIN:
        conf["type"] = side
        conf.setdefault("cniDir", str(cni_dir))
        if case.kube:
            conf.setdefault("kubeconfig", str(world.kubeconfigs[side]))
        return conf
    d = world.daemons()
    conf["type"] = "multus-shim" if side == MULTUS else OURS
    conf["daemonSocketDir"] = str(d.multus_socket_dir if side == MULTUS else d.ours.socket_dir)
    return conf


def _run_step(
    world: World,
    case: Case,
    step: Step,
    binary: Path,
    conf: Mapping[str, Any],
    cni_dir: Path,
    ctx: Mapping[str, str],
    prepared: Prepared | None,
) -> dict[str, Any]:
    log = Path(ctx["log"])
    before = len(log.read_text().splitlines()) if log.exists() else 0
    env = {
        "PATH": os.environ.get("PATH", ""),
        "CNI_COMMAND": step.command,
        "CNI_CONTAINERID": ctx["cid"],
        "CNI_NETNS": fill(step.netns, ctx),
        "CNI_IFNAME": step.ifname,
        "CNI_ARGS": fill(step.args, ctx),
        "CNI_PATH": str(world.bin_dir),
    }
    stdin = fill(step.stdin, ctx).encode() if step.stdin is not None else json.dumps(conf).encode()
    proc = subprocess.Popen(
        [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    if step.pod_after:
        assert prepared is not None
        # The scenario itself: the Pod object appears this long after the runtime's ADD began.
        try:
            out, err = proc.communicate(stdin, timeout=step.pod_after)
        except subprocess.TimeoutExpired:
            prepared.uid = world.create_pod(case, prepared)
            out, err = proc.communicate(timeout=CALL_TIMEOUT)
    else:
        out, err = proc.communicate(stdin, timeout=CALL_TIMEOUT)
    record: dict[str, Any] = {"command": step.command, "exit": proc.returncode}
    try:
        doc = json.loads(out) if out.strip() else None
    except ValueError:
        doc = {"unparsed stdout": out.decode(errors="replace")}
    if proc.returncode == 0:
        record["result"] = result_view(doc)
    else:
        doc = doc if isinstance(doc, dict) else {}
        record["error"] = {"code": doc.get("code"), "msg": doc.get("msg", doc.get("unparsed stdout"))}
        record["stderr"] = err.decode(errors="replace")[-2000:]
    lines = log.read_text().splitlines()[before:] if log.exists() else []
    record["delegates"] = [_call(json.loads(line)) for line in lines]
    record["cache"] = (cni_dir / ctx["cid"]).exists()
    if prepared is not None and case.pod is not None and step.command == "ADD":
        record["network-status"] = world.pod_network_status(prepared.namespace)
    if case.events and prepared is not None and step.command == "ADD":
        record["events"] = world.pod_events(prepared.namespace, wait=True)
    return record


def _call(entry: Mapping[str, Any]) -> dict[str, Any]:
    env = {k: entry["env"].get(k) for k in DELEGATE_ENV}
    # libcni puts binDir before CNI_PATH; an empty or repeated entry finds the same plugins.
    env["CNI_PATH"] = ":".join(dict.fromkeys(p for p in str(env["CNI_PATH"] or "").split(":") if p))
    env["CNI_ARGS"] = cni_args_view(str(env["CNI_ARGS"] or ""))
    stdin = entry["stdin"]
    if isinstance(stdin, dict):
        # prevResult carries the earlier plugin's result, compared already as that call's output
        stdin = {k: v for k, v in stdin.items() if k != "prevResult"}
    return {"command": entry["command"], "env": env, "stdin": stdin}


def result_view(doc: Any) -> Any:
    """A result as a runtime reads it: Go's encoder always writes ``"dns": {}``, which says no
    more than an absent ``dns``."""
    if isinstance(doc, dict) and doc.get("dns") == {}:
        return {k: v for k, v in doc.items() if k != "dns"}
    return doc


_TRUE = {"1", "true", "True"}


def cni_args_view(text: str) -> str:
    """CNI_ARGS as a delegate parses it: Multus thin appends the runtime's CNI_ARGS after its own
    list (IgnoreUnknown=true;K8S_POD_NAMESPACE=..;IgnoreUnknown=1;K8S_POD_NAMESPACE=..), and a
    later pair that repeats an earlier key with the same meaning changes nothing."""
    seen: dict[str, str] = {}
    kept: list[str] = []
    for pair in filter(None, text.split(";")):
        key, _, value = pair.partition("=")
        if key in seen and (
            seen[key] == value or (key == "IgnoreUnknown" and value in _TRUE and seen[key] in _TRUE)
        ):
            continue
        seen.setdefault(key, value)
        kept.append(pair)
    return ";".join(kept)


def normalise(value: Any, replacements: Mapping[str, str]) -> Any:
    """Side-specific strings (cache dir, bin dir, the Pod UID of that side's run) as placeholders."""
    if isinstance(value, str):
        for old, new in replacements.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: normalise(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, replacements) for v in value]
    return value


# ---------------------------------------------------------------------- comparing


def compare(case: Case, multus_obs: Observation, ours: Observation, *, spec_codes: bool = False) -> list[str]:
    """What differs, one line per point (empty: the same). With ``spec_codes`` an error code is
    no difference where Multus answers 999 (untyped) and ours is a CNI spec well-known code."""
    diffs: list[str] = []
    for index, (m, o) in enumerate(zip(multus_obs.steps, ours.steps, strict=True)):
        where = f"step {index + 1} ({m.get('command') or m.get('action')})"
        for key in sorted(set(m) | set(o)):
            if key == "stderr":
                continue
            mv, ov = m.get(key), o.get(key)
            if key == "error" and mv and ov:
                mv, ov = _error_view(case, mv, ov)
                if spec_codes and mv["code"] == UNTYPED_CODE and ov["code"] in WELL_KNOWN_CODES:
                    ov = {**ov, "code": mv["code"]}
            if key == "delegates" and mv != ov:
                diffs.append(f"{where} delegates: {_calls_diff(mv or [], ov or [])}")
                continue
            if mv != ov:
                diffs.append(f"{where} {key}: multus={_short(mv)} ours={_short(ov)}")
    return diffs


def _error_view(case: Case, m: Mapping[str, Any], o: Mapping[str, Any]) -> tuple[Any, Any]:
    """Error code and msg; with ``go_tail`` the msgs count as equal when ours starts with
    Multus's text up to and including the marker (the rest is a Go library's wording)."""
    mm, om = str(m.get("msg")), str(o.get("msg"))
    if case.go_tail and case.go_tail in mm:
        cut = mm.index(case.go_tail) + len(case.go_tail)
        if om.startswith(mm[:cut]):
            mm = om = mm[:cut] + "…"
    return {"code": m.get("code"), "msg": mm}, {"code": o.get("code"), "msg": om}


def _calls_diff(m: list[dict[str, Any]], o: list[dict[str, Any]]) -> str:
    """The delegate calls in one line each side (command:ifname:name), then the first call that differs."""

    def line(calls: list[dict[str, Any]]) -> str:
        return " ".join(
            f"{c['command']}:{c['env'].get('CNI_IFNAME')}:{(c['stdin'] or {}).get('name') if isinstance(c['stdin'], dict) else '?'}"
            for c in calls
        )

    text = f"multus=[{line(m)}] ours=[{line(o)}]"
    for a, b in zip(m, o, strict=False):
        if a != b:
            return text + f"; first differing call: multus={_short(a)} ours={_short(b)}"
    return text


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 1500 else text[:1500] + "…"


Runner = Callable[[World, Case, str, str], Observation]


# ---------------------------------------------------------------------- generated config (thick)

GENERATED_WAIT = 5.0


def run_autoconf(world: World, case: Case, side: str) -> Observation:
    """Start a daemon of ``side`` with ``multusConfigFile: auto`` and the case's primary CNI
    config files; observe the 00-multus.conf it writes (or that it writes none) and whether it
    stayed up."""
    assert case.autoconf is not None
    work = world.root / "autoconf" / case.id / side
    auto_dir, net_d = work / "auto", work / "net.d"
    auto_dir.mkdir(parents=True)
    net_d.mkdir()
    for name, content in case.autoconf["primary"].items():
        (auto_dir / name).write_text(content if isinstance(content, str) else json.dumps(content))
    config: dict[str, Any] = {
        "cniVersion": "0.4.0",
        "multusConfigFile": "auto",
        "multusAutoconfigDir": str(auto_dir),
        "cniConfigDir": str(net_d),
        "socketDir": str(work / "sock"),
        **case.autoconf.get("keys", {}),
    }
    generated = net_d / "00-multus.conf"
    with ExitStack() as stack:
        if side == MULTUS:
            bootstrap, cert_dir = multus_identity(world.bed, work)
            config["perNodeCertificate"] = {
                "enabled": True,
                "bootstrapKubeconfig": str(bootstrap),
                "certDir": str(cert_dir),
                "certDuration": "24h",
            }
            path = work / "daemon-config.json"
            path.write_text(json.dumps(config))
            proc = subprocess.Popen(
                [str(world.multus_dir / "multus-daemon"), "-config", str(path)],
                env={"PATH": os.environ.get("PATH", ""), "MULTUS_NODE_NAME": world.bed.node_name},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        else:
            config["kubeconfig"] = str(world.kubeconfigs[OURS])
            env = {**os.environ, "NODE_NAME": world.bed.node_name}
            daemon = DaemonProc(work, config, env)
            with daemon.log_path.open("ab") as log:
                proc = subprocess.Popen(
                    [str(DAEMON), "--config", str(daemon.config_path)],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        stack.callback(end_process, proc)
        # Multus writes the file once its config manager ran (after it serves); a daemon that
        # never writes one costs this whole bounded wait.
        deadline = time.monotonic() + GENERATED_WAIT
        while not generated.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        text = generated.read_text() if generated.exists() else None
        running = proc.poll() is None
    replacements = {str(auto_dir): "<autoDir>"}
    return Observation(
        [normalise({"generated": json.loads(text) if text else None, "running": running}, replacements)]
    )
