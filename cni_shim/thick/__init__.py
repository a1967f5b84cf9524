"""Thick mode: the shim's socket client and the daemon's HTTP server that runs requests."""
