"""Placeholder entry point for console scripts whose issue has not landed yet."""

import sys


def not_implemented(command: str, issue: str) -> int:
    print(f"{command}: not implemented yet (tracked by the issue '{issue}')", file=sys.stderr)
    return 3
