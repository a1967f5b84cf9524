"""The differential suite's data model: one case is an invocation both implementations receive.

A case names the Multus unit test it re-expresses (``source`` file and ``test`` name), the API
objects it needs, the CNI config (stdin), the steps (CNI commands with their environment) and how
error messages are compared. Placeholders in braces are filled per run by the harness:

``{log}``      the recorder delegates' shared call log (one per case, read and emptied per side)
``{work}``     the case's private directory (config files, readiness files, ...)
``{confdir}``  ``{work}/confdir``, the multus ``confDir`` unless the case sets its own
``{ns}``       the case's namespace (also its Pod's); ``{other}`` a second namespace
``{netns}``    a real network namespace path; ``{cid}`` the container ID; ``{uid}`` the Pod UID
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

THIN = "thin"
THICK = "thick"
BOTH = (THIN, THICK)

POD_ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME=workload;K8S_POD_INFRA_CONTAINER_ID={cid};K8S_POD_UID={uid}"
POD_ARGS_NO_UID = (
    "IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME=workload;K8S_POD_INFRA_CONTAINER_ID={cid}"
)


@dataclass(frozen=True)
class Step:
    """One CNI call (or, with ``action``, one change to the API objects between calls)."""

    command: str = "ADD"
    args: str = POD_ARGS
    netns: str = "{netns}"
    ifname: str = "eth0"
    stdin: str | None = None  # raw stdin instead of the case's conf (malformed JSON cases)
    # Pod created this many seconds after the command started (the Pod is absent before).
    pod_after: float = 0.0
    # "delete-pod": remove the Pod (grace 0) and wait until it is gone;
    # "annotate": patch the Pod's annotations to ``annotations``
    action: str = ""
    annotations: dict[str, str] | None = None


@dataclass(frozen=True)
class Case:
    id: str
    source: str  # Multus test file, relative to the multus-cni repository ("" for issue cases)
    test: str  # the Multus test name (Ginkgo It text), or the issue point it covers
    conf: dict[str, Any]
    steps: tuple[Step, ...] = (Step(),)
    pod: dict[str, str] | None = None  # the Pod's annotations; None: no Pod exists
    nads: dict[str, Any] = field(default_factory=dict)  # name -> spec.config (dict or raw str)
    nad_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    other_nads: dict[str, Any] = field(default_factory=dict)  # NADs in the {other} namespace
    files: dict[str, str] = field(default_factory=dict)  # {work}-relative path -> content
    modes: tuple[str, ...] = BOTH
    kube: bool = True  # the invocation has API access (thin: a kubeconfig in the conf)
    # Where Multus's msg ends with a Go library's text (encoding/json, net, os), only the part
    # up to and including this marker is compared; ours must start with that same part.
    go_tail: str = ""
    events: bool = False  # also compare the Pod's AddedInterface / NoNetworkFound Events
    full: bool = False  # slow (waits on purpose, starts daemons): only in `make compat`
    # Multus thick's generated 00-multus.conf: the daemon config's generator keys and the
    # primary CNI config files of its multusAutoconfigDir (case kind "autoconf").
    autoconf: dict[str, Any] | None = None
    # The kubelet's device-plugin checkpoint (placeholders filled) for the resourceName lookup:
    # Multus (thin) runs in a private mount namespace whose /var/lib holds it, as its fixed path
    # /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint; cni-shim is told the file.
    kubelet_checkpoint: str | None = None


@dataclass(frozen=True)
class Deliberate:
    """Where cni-shim differs from Multus on purpose, and why (docs/compatibility.md lists every entry)."""

    reason: str
    modes: tuple[str, ...] = BOTH  # the modes that differ (a mode that matches is not an entry)
    # Only the error code differs: Multus answers 999 for untyped errors, we a CNI spec
    # well-known code. Everything else, the msg included, must still match exactly.
    code_only: bool = False


def rec(name: str, version: str = "1.0.0", **extra: Any) -> dict[str, Any]:
    """A recording fake delegate (plugins/recorder.py) named ``name``."""
    conf: dict[str, Any] = {"cniVersion": version, "name": name, "type": "recorder", "logFile": "{log}"}
    conf.update(extra)
    return conf


def rec_list(name: str, version: str = "1.0.0", plugins: int = 1, **extra: Any) -> dict[str, Any]:
    """A conflist of ``plugins`` recorders named ``name``."""
    return {
        "cniVersion": version,
        "name": name,
        "plugins": [{"type": "recorder", "logFile": "{log}", **extra} for _ in range(plugins)],
    }


def multus(version: str = "1.0.0", **keys: Any) -> dict[str, Any]:
    """A multus config (the harness adds type, binDir, cniDir and the kubeconfig)."""
    return {"cniVersion": version, "name": "multus-cni-network", **keys}
