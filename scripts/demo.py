"""`make demo`: placeholder until the end-to-end issue lands."""

import sys

print("demo: the end-to-end flow is not built yet; see the open issues", file=sys.stderr)
