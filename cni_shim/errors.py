"""CNI-level errors: a ReasonedError that also carries the CNI spec error code.

The code travels in the error details so the exception survives pickling (thick mode hands
errors across processes) without a second constructor contract.
"""

from cni_shim import reasons
from sriov_contract.errors import ReasonedError

# CNI spec error codes (SPEC.md "Error"); 999 is what Go's skel uses for untyped failures.
INCOMPATIBLE_VERSION = 1
UNSUPPORTED_FIELD = 2
UNKNOWN_CONTAINER = 3
INVALID_ENVIRONMENT = 4
IO_FAILURE = 5
DECODE_FAILURE = 6
INVALID_NETWORK_CONFIG = 7
TRY_AGAIN_LATER = 11
INTERNAL = 999


class CniError(ReasonedError):
    """A failure reported to the runtime as CNI error JSON with a spec error code."""

    def __init__(self, reason: str, message: str, code: int = INTERNAL, cni_details: str = "") -> None:
        super().__init__(reason, message, code=code, cni_details=cni_details)

    @property
    def code(self) -> int:
        return int(self.details["code"])

    @property
    def cni_details(self) -> str:
        return str(self.details.get("cni_details", ""))

    @property
    def passthrough(self) -> bool:
        """A delegate's own error, answered as the delegate gave it (Multus's STATUS)."""
        return bool(self.details.get("passthrough", False))

    def wrap(self, prefix: str, code: int | None = None) -> "CniError":
        """The same failure behind a context prefix (Multus wraps errors with %v as they rise)."""
        return CniError(
            self.reason, prefix + self.message, self.code if code is None else code, self.cni_details
        )

    def to_json(self, cni_version: str) -> dict[str, object]:
        """msg is the wording (Multus's where it has one); details leads with our stable reason."""
        body: dict[str, object] = {"cniVersion": cni_version, "code": self.code, "msg": self.message}
        if self.passthrough:
            if self.cni_details:
                body["details"] = self.cni_details
            return body
        body["details"] = f"{self.reason}: {self.cni_details}" if self.cni_details else self.reason
        return body


def delegate_error(err: "CniError") -> "CniError":
    """A delegate's structured error exactly as it printed it (code, msg, details), or err itself."""
    raw = err.details.get("delegate_msg")
    if not isinstance(raw, str):
        return err
    out = CniError(err.reason, raw, err.code, err.cni_details)
    out.details["passthrough"] = True
    return out


def config_error(message: str) -> "CniError":
    return CniError(reasons.INVALID_NETWORK_CONFIG, message, INVALID_NETWORK_CONFIG)


class ApiError(CniError):
    """A Kubernetes API request failed; `status` is the HTTP status, 0 for a transport failure."""

    def __init__(self, message: str, status: int) -> None:
        transient = status == 0 or status >= 500 or status == 429
        super().__init__(
            reasons.KUBE_API_UNAVAILABLE if transient else reasons.KUBE_API_REFUSED,
            message,
            TRY_AGAIN_LATER if transient else INTERNAL,
        )
        self.details["status"] = status

    @property
    def status(self) -> int:
        return int(self.details["status"])


class RemoteError(CniError):
    """CNI error JSON from elsewhere (cni-shim-daemon's answer), carried to the runtime as it is."""

    def __init__(self, doc: dict[str, object]) -> None:
        code = doc.get("code")
        super().__init__(
            reasons.DAEMON_REPORTED_ERROR,
            str(doc.get("msg")),
            code if isinstance(code, int) else INTERNAL,
            str(doc.get("details") or ""),
        )
        self.doc = doc

    def to_json(self, cni_version: str) -> dict[str, object]:
        return self.doc
