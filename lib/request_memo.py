"""A value worked out at most once per request (a page of fifty rows asks the same question fifty times) and
at every call outside one (dispatchers, commands, where the answer may change between two calls).

`RequestMemo.middleware` is the middleware that opens and closes the memo; nothing is read until asked.
`RequestMemo.scope` opens one for a block outside a request (a log line's fields, a batch's log lines)."""

from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any


class RequestMemo:
    def __init__(self, name: str) -> None:
        self._memo: ContextVar[dict | None] = ContextVar(name, default=None)

    def middleware(self, get_response):
        """Middleware: a fresh memo for each request, dropped when it is answered."""

        def middleware(request):
            token = self._memo.set({})
            try:
                return get_response(request)
            finally:
                self._memo.reset(token)

        return middleware

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Within the block each key is worked out at most once, as within a request; inside one already open
        (a request, an outer block) that one holds."""
        if self._memo.get() is not None:
            yield
            return
        token = self._memo.set({})
        try:
            yield
        finally:
            self._memo.reset(token)

    def missing(self, keys: Iterable[Hashable]) -> list[Hashable]:
        """Those of `keys` not yet worked out in this request, each once; none outside a request, where
        nothing is kept (so a caller reading several at once reads them only where they will be kept)."""
        memo = self._memo.get()
        return [] if memo is None else [key for key in dict.fromkeys(keys) if key not in memo]

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """`compute()`, kept under `key` for the rest of the request; inside no request, worked out anew."""
        memo = self._memo.get()
        if memo is None:
            return compute()
        if key not in memo:
            memo[key] = compute()
        return memo[key]
