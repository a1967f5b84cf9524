"""Node adapters: running plugin processes, files under cniDir, routes inside a netns, logs."""
