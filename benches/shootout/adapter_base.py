"""The interface every shootout adapter implements (adapters.py, capi.py): see the
docstring of adapters.py for what each method does."""

from __future__ import annotations

from typing import Any

BATCH_LOAD = 1000
#: Tries of one load transaction that fails with a temporary error (0.1 s apart).
LOAD_RETRIES = 600


class Adapter:
    """The shared interface; `worker` is how extra clients run: processes or threads."""

    worker = "process"

    def __init__(self, params: dict[str, Any]) -> None:
        self.p = params

    def setup(self) -> None:
        pass

    def load(self, n: int, value: bytes) -> None:
        raise NotImplementedError

    def warm(self) -> None:
        pass

    def read(self, key: int) -> bytes | None:
        raise NotImplementedError

    def read_batch(self, keys: list[int]) -> int:
        raise NotImplementedError

    def update(self, key: int, value: bytes) -> None:
        raise NotImplementedError

    def update_batch(self, items: dict[int, bytes]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
