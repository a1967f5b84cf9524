"""The version-1 cross-repo contract shared by the driver and the CNI shim.

Only the standard library may be imported from this package's runtime modules: the CNI
executable imports it on its hot path.
"""
