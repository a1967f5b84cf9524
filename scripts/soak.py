"""`make soak`: a churn soak with seeded kills on two real nodes (testbed/soak.py).

Starts the test bed, then a Stack with a second real node (each node: fake SR-IOV node,
containerd, kubelet, sriov-dra-driver, cni-shim-daemon), creates and deletes SOAK_PODS managed
Pods (default 200), SOAK_IN_FLIGHT at once (default 8: every VF of both nodes in use), while the
seeded schedule kills the driver, the daemon and the kubelet (SOAK_KILLS, default 15) and reboots a
node (SOAK_REBOOTS, 2), flaps a PF's link (SOAK_LINK_FLAPS, 2), restarts the API server
(SOAK_APISERVER_RESTARTS, 1) and deletes a node's CNI delegate cache (SOAK_CACHE_DELETIONS, 2);
checks that nothing leaked; tears everything down. A seed names the same kills as before these
events existed (they come from their own stream); set their counts to 0 for the old schedule. Bounded by SOAK_TIME_LIMIT seconds of churn (default 900). Exit 1 on any failure,
naming the seed: `SOAK_SEED=<seed> make soak` repeats its schedule. Run it under the bed lock
(`flock /tmp/auto-sriov-bed.lock make soak`) on a shared machine.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from sriov_contract.errors import ReasonedError  # noqa: E402 - after the sys.path entry for the repo
from testbed import controlplane, realnode, soak  # noqa: E402
from testbed.checks import stack_down_check  # noqa: E402
from testbed.stack import Stack  # noqa: E402
from testbed.tools import ToolSet  # noqa: E402


def say(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


def main() -> int:
    config = soak.Config(
        seed=soak.seed_from(os.environ.get("SOAK_SEED")),
        pods=int(os.environ.get("SOAK_PODS", "200")),
        in_flight=int(os.environ.get("SOAK_IN_FLIGHT", "8")),
        kills=int(os.environ.get("SOAK_KILLS", "15")),
        time_limit_s=float(os.environ.get("SOAK_TIME_LIMIT", "900")),
        reboots=int(os.environ.get("SOAK_REBOOTS", "2")),
        link_flaps=int(os.environ.get("SOAK_LINK_FLAPS", "2")),
        apiserver_restarts=int(os.environ.get("SOAK_APISERVER_RESTARTS", "1")),
        cache_deletions=int(os.environ.get("SOAK_CACHE_DELETIONS", "2")),
    )
    tools = ToolSet()
    reason = realnode.unavailable_reason(tools)
    if reason:
        say(f"soak: the real kubelet cannot run here ({reason}); the soak needs it")
        return 1
    say(f"== auto-sriov soak: seed {config.seed} ==")
    started = time.monotonic()
    bed = controlplane.start(tools=tools, run_id=controlplane.new_run_id("soak"))
    try:
        with Stack(bed, thick=True, second_node=True, say=say) as stack:
            say(
                f"soak: two nodes up in {time.monotonic() - started:.0f}s: {[n.node_name for n in stack.nodes]}"
            )
            report = soak.Soak(stack, config, say).run()
            if not report.ok:
                for node in stack.nodes:
                    say(f"--- {node.node_name} ---\n{node.logs()}")
        down = stack_down_check(stack)
        report.end_checks.append(down)
    except ReasonedError as exc:
        say(f"soak: {exc.reason}: {exc.message}\nSOAK FAIL -- reproduce with SOAK_SEED={config.seed}")
        return 1
    except Exception as exc:  # one line naming the seed; the logs above say more
        say(f"soak: unexpected {type(exc).__name__}: {str(exc)[:2000]}")
        say(f"SOAK FAIL -- reproduce with SOAK_SEED={config.seed}")
        return 1
    finally:
        bed.stop()
    print(report.summary())
    print(f"total {time.monotonic() - started:.0f}s")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
