"""The operator's pure planning: validation, the source NAD, resolution, filter translation and the
desired-state plan. No API client, no threads, no I/O except through the ports callers pass in."""
