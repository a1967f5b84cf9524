"""The shim's functional core: pure CNI and Multus rules (protocol, config, delegate choice, guard, plan).

Nothing here talks to the API server, runs a process or imports an adapter; the one exception is
delegates' read of confDir files, which Multus also does while building its delegate list."""
