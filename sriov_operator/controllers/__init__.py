"""The two controllers (orchestration): read live, plan with the pure core, write, report."""
