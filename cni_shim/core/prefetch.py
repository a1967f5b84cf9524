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

A Pod's managed shadows come in one request instead of one GET each: a LIST of the Pod's
namespace by the shadows' pod-UID label (`Listing`), started beside the Pod GET when the
informer copy's registry names at least LIST_FROM of them, or after it when only the live Pod's
registry does. Why that is as live as the GETs: a LIST without a resourceVersion is a consistent
read, like a GET, answered after this ADD began, and each object in it is the object a GET of
its key would have returned then. Only the answers by key are used: a selection the LIST did not
answer (a NAD without the label, a LIST that failed, a registry that named other NADs) is read by
its own GET as before, so whether an object carries the label never decides anything; the guard
then checks every shadow exactly as it checks a GET's answer.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from cni_shim.core.shadowrebuild import selector
from sriov_contract.errors import ReasonedError
from sriov_contract.keys import label_value
from sriov_contract.networks import parse_network_selections
from sriov_lib import quickjson

Key = tuple[str, str]  # (namespace, name) of a NetworkAttachmentDefinition

# From this many shadows on, one LIST answers them: below it a GET each costs no more requests.
LIST_FROM = 2


@dataclass(frozen=True)
class Listing:
    """One LIST of a Pod's shadows: its namespace, the label selector, the NADs it should answer."""

    namespace: str
    selector: str
    keys: frozenset[Key]


@dataclass(frozen=True)
class NadReads:
    reuse: frozenset[Key]  # needed and prefetched: the prefetched answer is used
    read_now: tuple[
        Key, ...
    ]  # needed, neither prefetched nor listed: read now, once each, in first-use order
    # needed and expected in the LIST's answer (read by its own GET if the answer lacks it)
    from_listing: frozenset[Key] = frozenset()


def guessed_nads(networks: str, namespace: str) -> tuple[Key, ...]:
    """The NADs an informer copy's networks annotation names; nothing when it does not parse.

    A copy that does not parse is no error of this ADD: the live Pod decides, and reports it.
    """
    try:
        selections = parse_network_selections(networks, namespace)
    except (ReasonedError, RecursionError):
        return ()
    return tuple(dict.fromkeys((sel.namespace, sel.name) for sel in selections))


def shadow_listing(registry: str | None, namespace: str) -> Listing | None:
    """The LIST of the shadows a Pod's registry annotation names in the Pod's namespace (where
    the driver creates them); None for fewer than LIST_FROM, or a registry without a usable Pod
    UID. Read loosely, without the contract's checks: it only says which answers to expect from
    the LIST (a wrong expectation costs a GET), and the guard judges the live Pod's registry."""
    if registry is None:
        return None
    try:
        doc = quickjson.loads(registry)
        uid = label_value(doc["podUID"])
        entries = doc["entries"]
        keys = frozenset(
            (e["namespace"], e["name"])
            for e in entries
            if e["namespace"] == namespace and isinstance(e["name"], str)
        )
    except (ValueError, ReasonedError, RecursionError, KeyError, TypeError):
        return None
    return Listing(namespace, selector(uid), keys) if len(keys) >= LIST_FROM else None


def worth_listing(listing: Listing, needed: Sequence[Key], prefetched: Set[Key]) -> bool:
    """Whether the LIST still saves requests: LIST_FROM of its NADs are needed and not prefetched."""
    return len({key for key in needed if key in listing.keys and key not in prefetched}) >= LIST_FROM


def nad_reads(needed: Sequence[Key], prefetched: Set[Key], listed: Set[Key] = frozenset()) -> NadReads:
    """Split the live Pod's NADs into prefetched answers to use, answers to take from the LIST
    and reads still to make."""
    return NadReads(
        reuse=frozenset(key for key in needed if key in prefetched),
        read_now=tuple(key for key in dict.fromkeys(needed) if key not in prefetched and key not in listed),
        from_listing=frozenset(key for key in needed if key in listed and key not in prefetched),
    )
