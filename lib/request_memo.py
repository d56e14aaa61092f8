"""A value worked out at most once per request (a page of fifty rows asks the same question fifty times) and
at every call outside one (dispatchers, commands, where the answer may change between two calls).

`RequestMemo.middleware` is the middleware that opens and closes the memo; nothing is read until asked."""

from collections.abc import Callable, Hashable
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

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """`compute()`, kept under `key` for the rest of the request; inside no request, worked out anew."""
        memo = self._memo.get()
        if memo is None:
            return compute()
        if key not in memo:
            memo[key] = compute()
        return memo[key]
