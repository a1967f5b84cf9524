"""Typed access to what the Kubernetes client answers.

Every field of the client's models is Optional and the custom-objects API answers `object`. Code
that expects a field to be set says so here and fails naming the field, instead of an
AttributeError on None or an unchecked cast at each call site.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from kubernetes import client

T = TypeVar("T")


class Described(Protocol):
    """Any client model with object metadata (V1Pod, V1Namespace, ...)."""

    @property
    def metadata(self) -> client.V1ObjectMeta | None: ...


def present(value: T | None, what: str) -> T:
    if value is None:
        raise AssertionError(f"{what} is not set")
    return value


def meta(obj: Described) -> client.V1ObjectMeta:
    return present(obj.metadata, f"metadata of {type(obj).__name__}")


def name_of(obj: Described) -> str:
    return present(meta(obj).name, f"metadata.name of {type(obj).__name__}")


def uid_of(obj: Described) -> str:
    return present(meta(obj).uid, f"metadata.uid of {type(obj).__name__} {meta(obj).name}")


def annotations_of(obj: Described) -> dict[str, str]:
    """The annotations; none set is an empty map, as the API server itself treats it."""
    return meta(obj).annotations or {}


def as_object(answer: object) -> dict[str, Any]:
    """One object as the custom-objects API (or `sanitize_for_serialization`) answers it."""
    if not isinstance(answer, dict):
        raise AssertionError(f"expected a JSON object from the API, got {type(answer).__name__}")
    return answer


def items_of(answer: object) -> list[dict[str, Any]]:
    """The `items` of a custom-objects list answer."""
    listed: list[dict[str, Any]] = as_object(answer)["items"]
    return listed
