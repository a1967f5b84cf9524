"""Which NAD reads a live ADD starts before its live Pod arrives, and which of them it may use.

A live ADD would otherwise wait for two round trips in series: the Pod GET, then the GETs of the
NADs that Pod selects. The daemon guesses those NADs from its informer copy of the Pod and
starts their GETs beside the Pod GET; once the live Pod is parsed, `nad_reads` decides which
guesses are used and what is still to read.

Why every answer used is as live as before: the request's own view starts the prefetch at its
first Pod read, so each prefetched answer is a GET the API server answered after this ADD began,
just like a GET made after the live Pod arrived. Why the informer copy never decides anything:
the NADs used are the live Pod's selections, looked up among the prefetched answers only by key;
the answer to a guess the live Pod does not name is dropped unused (a failed one too, so it
fails nothing), and a NAD the guess missed is read then, as without a prefetch. A stale copy
therefore costs at most its wasted GETs.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from sriov_contract.errors import ReasonedError
from sriov_contract.networks import parse_network_selections

Key = tuple[str, str]  # (namespace, name) of a NetworkAttachmentDefinition


@dataclass(frozen=True)
class NadReads:
    reuse: frozenset[Key]  # needed and prefetched: the prefetched answer is used
    read_now: tuple[Key, ...]  # needed and not prefetched: read now, once each, in first-use order


def guessed_nads(networks: str, namespace: str) -> tuple[Key, ...]:
    """The NADs an informer copy's networks annotation names; nothing when it does not parse.

    A copy that does not parse is no error of this ADD: the live Pod decides, and reports it.
    """
    try:
        selections = parse_network_selections(networks, namespace)
    except (ReasonedError, RecursionError):
        return ()
    return tuple(dict.fromkeys((sel.namespace, sel.name) for sel in selections))


def nad_reads(needed: Sequence[Key], prefetched: Set[Key]) -> NadReads:
    """Split the live Pod's NADs into prefetched answers to use and reads still to make."""
    return NadReads(
        reuse=frozenset(key for key in needed if key in prefetched),
        read_now=tuple(key for key in dict.fromkeys(needed) if key not in prefetched),
    )
