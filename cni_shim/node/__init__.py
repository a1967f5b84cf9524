"""Adapters to this node: running plugin processes, files under cniDir, routes inside a netns, log output."""
