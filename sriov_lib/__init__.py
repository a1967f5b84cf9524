"""Standard-library-only building blocks that the three programs share.

Lossless and fast JSON for the CNI executable's start-up path (`quickjson`, `rawjson`), typed
immutable records that cost no `typing` import (`typedtuple`), and crash-safe file replacement
(`durable`). Nothing here knows the contract or any component: `sriov_contract`, `cni_shim`,
`sriov_dra` and `sriov_operator` build on it, and an import-linter contract keeps it to the
standard library, because the CNI executable imports it on every start.
"""
