"""The composition root: the only code that builds adapters and hands them to the flows."""
