"""CNI spec versions: parsing, ordering and the negotiation rule for delegates.

Importing this module costs nothing beyond the interpreter: the VERSION verb answers from it
alone, so the error types are imported only when a version is actually refused.
"""

from cni_shim import reasons

# Spelled out instead of imported: `typing` alone costs milliseconds on every start.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Iterable

SUPPORTED = ("0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
CURRENT = SUPPORTED[-1]


def parse(version: str) -> tuple[int, int, int]:
    """Order a version string; an empty version means 0.1.0 as in libcni."""
    if version == "":
        return (0, 1, 0)
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() and len(p) <= 6 for p in parts):
        from cni_shim.errors import DECODE_FAILURE, CniError  # noqa: PLC0415 - see module docstring

        raise CniError(
            reasons.INVALID_CNI_VERSION, f"cniVersion {version!r} is not of the form X.Y.Z", DECODE_FAILURE
        )
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def at_least(version: str, minimum: str) -> bool:
    return parse(version) >= parse(minimum)


def require_supported(version: str) -> str:
    effective = version or "0.1.0"
    if effective not in SUPPORTED:
        from cni_shim.errors import INCOMPATIBLE_VERSION, CniError  # noqa: PLC0415 - see module docstring

        raise CniError(
            reasons.INCOMPATIBLE_CNI_VERSION,
            f"config is {version!r}, cni-shim supports {list(SUPPORTED)}",
            INCOMPATIBLE_VERSION,
        )
    return effective


def select(candidates: "Iterable[str]", plugin_supports: "Iterable[str]") -> str | None:
    """Highest candidate that both we and the plugin speak (CNI 1.1 version selection)."""
    common = set(candidates) & set(plugin_supports) & set(SUPPORTED)
    return max(common, key=parse) if common else None


def version_json() -> str:
    """The VERSION answer, built without the json module (start-up time matters here)."""
    listed = ", ".join(f'"{v}"' for v in SUPPORTED)
    return f'{{"cniVersion": "{CURRENT}", "supportedVersions": [{listed}]}}'


ABOUT = "cni-shim: Multus-compatible meta-plugin that delegates to other CNI plugins"


def about() -> str:
    return f"{ABOUT}\nCNI protocol versions supported: {', '.join(SUPPORTED)}"
