"""The `cni-shim-daemon` command: reads its config, logs JSON lines to stderr, runs the daemon.

What the daemon is made of (informers, views, the socket server) is cni_shim.app.thick's.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, TextIO

import click

from cni_shim.app import thick
from cni_shim.app.config import load_config
from sriov_contract.errors import ReasonedError


class JsonLog:
    """One JSON object per line: time, level, msg and the request's context fields."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def __call__(self, level: str, msg: str, **fields: Any) -> None:
        line = json.dumps(
            {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "level": level, "msg": msg, **fields}
        )
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config", "config_path", required=True, help="daemon-config.json; its keys override the shim's."
)
@click.option("--metrics-address", default="", help="host:port for /metrics (overrides metricsPort).")
@click.option(
    "--health-address",
    default="",
    help="host:port for kubelet's /healthz and /readyz probes, answered through the socket.",
)
@click.option(
    "--enable-test-hooks",
    is_flag=True,
    hidden=True,
    help="Serve /debug/informers and /debug/informers/freeze on the socket (tests only).",
)
def cli(config_path: str, metrics_address: str, health_address: str, enable_test_hooks: bool) -> None:
    """Serve cni-shim's thick mode on a unix socket."""
    log = JsonLog(sys.stderr)
    env = dict(os.environ)
    try:
        conf = load_config(config_path, env, metrics_address, health_address)
        status = thick.run(conf, env, test_hooks=enable_test_hooks, log=log)
    except ReasonedError as exc:
        log("error", str(exc))
        sys.exit(1)
    except OSError as exc:
        log("error", f"StartupFailed: {exc}; check the socket directory and the metrics and health addresses")
        sys.exit(1)
    sys.exit(status)


def main() -> None:
    cli()
