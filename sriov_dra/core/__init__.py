"""Pure, deterministic driver helpers: rendering, template resolution, interface plans, merges.

Nothing here performs I/O; every function takes plain data and returns data or raises a
DriverCoreError with a stable reason.
"""
