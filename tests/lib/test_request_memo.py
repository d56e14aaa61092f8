"""`lib.request_memo.RequestMemo`: within a request a value is worked out once per key and only when asked;
outside a request, at every call (a dispatcher must see a rotated secret or a changed contract at once)."""

from lib.request_memo import RequestMemo


def _counting():
    calls = []

    def compute(value):
        def read():
            calls.append(value)
            return value

        return read

    return calls, compute


def test_within_a_request_each_key_is_worked_out_once_and_only_when_asked():
    memo, (calls, compute) = RequestMemo("test"), _counting()

    def view(request):
        assert calls == []  # nothing read before it is asked
        assert [memo.get("a", compute(1)) for _ in range(3)] == [1, 1, 1]
        assert memo.get("b", compute(2)) == 2
        return "answered"

    assert memo.middleware(view)(object()) == "answered"
    assert calls == [1, 2]
    assert memo.middleware(lambda request: "nothing asked")(object()) == "nothing asked"
    assert calls == [1, 2]


def test_outside_a_request_and_in_the_next_request_it_is_worked_out_again():
    memo, (calls, compute) = RequestMemo("test"), _counting()
    memo.get("a", compute(1))
    memo.get("a", compute(1))
    assert calls == [1, 1]
    for _ in range(2):
        memo.middleware(lambda request: memo.get("a", compute(1)))(object())
    assert calls == [1, 1, 1, 1]


def test_within_a_scope_each_key_is_worked_out_once_and_an_inner_scope_keeps_the_outer_ones():
    memo, (calls, compute) = RequestMemo("test"), _counting()
    with memo.scope():
        assert calls == []  # nothing read before it is asked
        assert [memo.get("a", compute(1)) for _ in range(3)] == [1, 1, 1]
        with memo.scope():
            assert memo.get("a", compute(1)) == 1
        assert memo.get("a", compute(1)) == 1
    assert calls == [1]
    memo.get("a", compute(1))  # after the block, at every call again
    assert calls == [1, 1]


def test_missing_names_the_keys_not_yet_worked_out_in_the_request_and_none_outside_one():
    memo, (_calls, compute) = RequestMemo("test"), _counting()
    assert memo.missing(["a", "b"]) == [], "outside a request nothing would be kept"
    with memo.scope():
        memo.get("a", compute(1))
        assert memo.missing(["a", "b", "c", "b"]) == ["b", "c"]
