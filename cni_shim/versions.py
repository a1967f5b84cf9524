"""CNI spec versions: parsing, ordering and the negotiation rule for delegates."""

from __future__ import annotations

from collections.abc import Iterable

from cni_shim.errors import DECODE_FAILURE, INCOMPATIBLE_VERSION, CniError

SUPPORTED = ("0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
CURRENT = SUPPORTED[-1]


def parse(version: str) -> tuple[int, int, int]:
    """Order a version string; an empty version means 0.1.0 as in libcni."""
    if version == "":
        return (0, 1, 0)
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() and len(p) <= 6 for p in parts):
        raise CniError(
            "InvalidCniVersion", f"cniVersion {version!r} is not of the form X.Y.Z", DECODE_FAILURE
        )
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def at_least(version: str, minimum: str) -> bool:
    return parse(version) >= parse(minimum)


def require_supported(version: str) -> str:
    effective = version or "0.1.0"
    if effective not in SUPPORTED:
        raise CniError(
            "IncompatibleCniVersion",
            f"config is {version!r}, cni-shim supports {list(SUPPORTED)}",
            INCOMPATIBLE_VERSION,
        )
    return effective


def select(candidates: Iterable[str], plugin_supports: Iterable[str]) -> str | None:
    """Highest candidate that both we and the plugin speak (CNI 1.1 version selection)."""
    common = set(candidates) & set(plugin_supports) & set(SUPPORTED)
    return max(common, key=parse) if common else None
