"""Advertising: sysfs discovery -> SriovResourcePolicy evaluation -> this node's ResourceSlices."""
