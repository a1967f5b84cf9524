"""Run a few callables at once on at most `limit` threads; answers come back in input order.

`threading` is imported on the first call, not at import: the CNI shim's start-up budget counts
every module, and only a Pod with several delegates that may overlap reaches this.
"""

from __future__ import annotations

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TypeVar

    T = TypeVar("T")


def run(tasks: Sequence[Callable[[], T]], limit: int) -> list[T | BaseException]:
    """Each task's return value, or the exception it raised, at the task's index.

    One task, or a limit of one, runs on the caller's thread: nothing to overlap, so no thread.
    """
    if len(tasks) <= 1 or limit <= 1:
        return [_answer(task) for task in tasks]
    import threading  # noqa: PLC0415 - see the module docstring

    answers: list[T | BaseException | None] = [None] * len(tasks)
    pending = iter(range(len(tasks)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                idx = next(pending, None)
            if idx is None:
                return
            answers[idx] = _answer(tasks[idx])

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(min(limit, len(tasks)) - 1)]
    for thread in workers:
        thread.start()
    worker()  # the caller's thread takes its share
    for thread in workers:
        thread.join()
    return answers  # type: ignore[return-value]  # every slot was filled by a worker


def _answer(task: Callable[[], T]) -> T | BaseException:
    try:
        return task()
    except BaseException as exc:  # handed back to the caller, who re-raises it in order
        return exc
