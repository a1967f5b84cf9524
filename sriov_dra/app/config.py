"""Node-agent settings from flags and environment, with upstream's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons

STANDALONE = "STANDALONE"
MULTUS = "MULTUS"


class ConfigError(ReasonedError):
    """The agent was started with settings that cannot work together."""


@dataclass(frozen=True)
class Config:
    node_name: str
    namespace: str = "dra-driver-sriov"
    cdi_root: Path = Path("/var/run/cdi")
    registrar_dir: Path = Path("/var/lib/kubelet/plugins_registry")
    plugins_dir: Path = Path("/var/lib/kubelet/plugins")
    sysfs_root: Path = Path("/sys")
    # Where the host's device nodes live, as CDI hostPaths: /dev on a node, a fake tree in the bed.
    dev_root: Path = Path("/dev")
    configuration_mode: str = STANDALONE
    multus_auto_attach: bool = False
    healthcheck_port: int = -1
    # The node's address (status.podIP of a host-network Pod) is where kubelet sends its probes;
    # empty means every address.
    healthcheck_host: str = ""
    kubeconfig: str | None = None
    repair_interval: float = 30.0
    metrics_port: int = -1

    def __post_init__(self) -> None:
        if not self.node_name:
            raise ConfigError(
                reasons.MISSING_NODE_NAME, "set --node-name or NODE_NAME to the node this agent manages"
            )
        mode = (self.configuration_mode or STANDALONE).upper()
        if mode not in (STANDALONE, MULTUS):
            raise ConfigError(
                reasons.INVALID_CONFIGURATION_MODE,
                f"CONFIGURATION_MODE {self.configuration_mode!r} is not STANDALONE or MULTUS",
            )
        object.__setattr__(self, "configuration_mode", mode)
        if not -1 <= self.healthcheck_port <= 65535:
            raise ConfigError(
                reasons.INVALID_HEALTHCHECK_PORT,
                f"HEALTHCHECK_PORT {self.healthcheck_port} must be -1 (off), 0 (any free port) or a TCP port",
            )
        if not 1.0 <= self.repair_interval <= 3600.0:
            raise ConfigError(
                reasons.INVALID_REPAIR_INTERVAL,
                f"REPAIR_INTERVAL {self.repair_interval} must be between 1 and 3600 seconds",
            )
        if not -1 <= self.metrics_port <= 65535:
            raise ConfigError(
                reasons.INVALID_METRICS_PORT,
                f"METRICS_PORT {self.metrics_port} must be -1 (off), 0 (any free port) or a TCP port",
            )
        if self.multus_auto_attach and mode != MULTUS:
            raise ConfigError(
                reasons.AUTO_ATTACH_REQUIRES_MULTUS,
                f"--multus-auto-attach / MULTUS_AUTO_ATTACH is only valid with CONFIGURATION_MODE=MULTUS "
                f"(got {mode}); set the mode to MULTUS or turn auto-attach off",
            )
