"""The composition roots: which adapters a thin invocation (thin) and the daemon (thick) get."""
