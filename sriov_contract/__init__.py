"""The version-1 cross-repo contract shared by the driver and the CNI shim.

Only the contract: identity, binding annotation, Pod registry, networks annotation, keys and
their reasons. It imports the standard library and `sriov_lib` alone, because the CNI executable
imports it on its hot path; the vector checker, which needs jsonschema, is the `sriov-dra
contract check` command (`sriov_dra.cli.contract`).
"""
