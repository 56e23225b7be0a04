"""What crosses to another process arrives as it was sent, and what cannot cross is refused
where it is given, with nothing of it delivered anywhere (two simulated processes: the codec
and protocol of a cluster, without sockets); so is a batch an exchange's key refuses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection

TWO_PROCESSES = {"workers": 1, "processes": 2, "transport": "inproc"}
TWO_WORKERS = {"workers": 2}


def structured() -> np.ndarray:
    return np.array([(1, 2.5), (2, -1.0), (3, 0.0), (4, 9.0)], dtype=[("a", "<i4"), ("b", "<f8")])


def objects() -> np.ndarray:
    array = np.empty(4, dtype=object)
    array[:] = [("a", 1), None, 2.5, "x"]
    return array


ARRAYS = {
    "datetime64": lambda: np.array(["2020-01-01", "2020-01-02", "NaT", "1999-12-31"], "M8[D]"),
    "timedelta64": lambda: np.arange(4).astype("m8[ms]"),
    "unicode": lambda: np.array(["apple", "fig", "kiwi", "banana"]),
    "bytes": lambda: np.array([b"a", b"bb", b"", b"dddd"]),
    "structured": structured,
    "object": objects,
    "big-endian": lambda: np.arange(4, dtype=">i8"),
}


def arrived(batch_of: Any, runtime: dict[str, Any]) -> list[tuple[str, str, bytes | list[Any]]]:
    """What each worker received, after an exchange that sends record ``i`` to worker
    ``i % 2``: the batch's type, its dtype and its contents."""

    def build(scope: naiad.Scope) -> list[Any]:
        got: list[Any] = []
        routes = lambda b: np.arange(len(b)) % 2  # noqa: E731
        scope.from_epochs([batch_of()]).exchange(keys=routes).inspect_batch(
            lambda t, b: got.append(b)
        )
        return got

    out = []
    for got in naiad.run(build, **runtime):
        for b in got:
            content = b.tolist() if b.dtype.hasobject else np.ascontiguousarray(b).tobytes()
            out.append((type(b).__name__, str(b.dtype), content))
    return sorted(out, key=repr)


@pytest.mark.parametrize("kind", sorted(ARRAYS))
def test_arrays_of_any_dtype_arrive_in_another_process_as_arrays(kind: str) -> None:
    """Regression: dates failed to encode; strings, bytes, structured and object arrays
    arrived in another process as lists (a vectorized step after the exchange then failed)."""
    assert arrived(ARRAYS[kind], TWO_PROCESSES) == arrived(ARRAYS[kind], TWO_WORKERS)


def test_numpy_scalar_records_arrive_in_another_process() -> None:
    """Regression: numpy strings, complex numbers and dates, what ``map`` over such arrays
    gives, were refused by the codec; a np.longdouble arrived rounded to a float."""
    words = np.array(["apple", "fig", "kiwi", "plum"])
    dates = np.array(["2020-01-01", "2021-06-30"], "M8[D]")
    extended = [np.longdouble(1) / 3, np.clongdouble(2) / 3j]

    def build(scope: naiad.Scope) -> list[Any]:
        records = list(words) + list(dates) + [np.complex128(1 + 2j)] + extended
        return scope.from_epochs([records]).exchange(lambda r: len(str(r))).collect()

    def run(runtime: dict[str, Any]) -> list[Any]:
        return sorted((r for out in naiad.run(build, **runtime) for _, r in out), key=str)

    # equal values (numpy strings and complex numbers arrive as Python's own; numbers that
    # Python's would round arrive as themselves)
    assert run(TWO_PROCESSES) == run(TWO_WORKERS)
    arrived = [r for r in run(TWO_PROCESSES) if isinstance(r, np.longdouble | np.clongdouble)]
    assert sorted(arrived, key=str) == sorted(extended, key=str)


async def test_a_batch_with_a_record_the_codec_refuses_is_delivered_nowhere() -> None:
    """Regression: the parts for this process's workers were delivered before the part for
    another process failed to encode, so resending the fixed batch duplicated them."""
    got: list[Any] = []
    async with naiad.Runtime(**TWO_PROCESSES) as rt:

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            stream.exchange(lambda r: r[0]).inspect(got.append)
            return handle

        df = rt.dataflow(build)
        first, second = df.results
        second.close()
        with pytest.raises(TypeError, match=r"cannot send a builtins\.set between processes"):
            first.send([(0, "local"), (1, {"remote"})])
        first.send([(0, "local"), (1, "fixed")])
        first.close()
        await df.finished()
    assert sorted(got) == [(0, "local"), (1, "fixed")]


@pytest.mark.parametrize("batch", [[(1, {"remote"})], [(0, "local"), (1, {"remote"})]])
async def test_a_record_the_codec_refuses_names_the_exchange(batch: list[Any]) -> None:
    """Regression: a refusal by the codec did not say which exchange the records were routed
    to (a refusal by the key did), whether the batch went to the other process whole or in
    part: the error named the type and nothing of the dataflow."""
    got: list[Any] = []
    async with naiad.Runtime(**TWO_PROCESSES) as rt:

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            stream.exchange(lambda r: r[0], name="by_first").inspect(got.append)
            return handle

        df = rt.dataflow(build)
        first, second = df.results
        second.close()
        with pytest.raises(
            TypeError, match=r"cannot send a builtins\.set between processes"
        ) as info:
            first.send(batch)
        assert "naiad: while routing records to operator 'by_first'" in info.value.__notes__
        first.send([(1, "fixed")])
        first.close()
        await df.finished()
    assert got == [(1, "fixed")]


async def test_an_array_whose_fields_are_out_of_order_is_refused_saying_why() -> None:
    """Regression: a structured array whose fields are out of order in memory (a view
    selecting fields, a dtype with offsets) was refused by numpy's own "dtype.descr is not
    defined for types with overlapping or out-of-order fields", a ValueError that said
    nothing of the send; the same array repacked crosses."""
    from numpy.lib.recfunctions import repack_fields

    swapped = np.dtype({"names": ["a", "b"], "formats": ["<i4", "<i4"], "offsets": [4, 0]})
    array = np.zeros(3, dtype=swapped)
    array["a"], array["b"] = [1, 2, 3], [4, 5, 6]
    got: list[Any] = []
    async with naiad.Runtime(**TWO_PROCESSES) as rt:

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            stream.exchange(lambda r: 1, name="over").inspect(got.append)
            return handle

        df = rt.dataflow(build)
        first, second = df.results
        second.close()
        with pytest.raises(TypeError, match=r"fields are out of order.*repack_fields") as info:
            first.send(array)
        assert "naiad: while routing records to operator 'over'" in info.value.__notes__
        first.send(repack_fields(array))
        first.close()
        await df.finished()
    assert [tuple(r.tolist()) for r in got] == [(1, 4), (2, 5), (3, 6)]


@pytest.mark.parametrize("remote", ["exchange", "broadcast"])
@pytest.mark.parametrize("local_first", [True, False])
async def test_a_refused_batch_reaches_none_of_an_inputs_consumers(
    remote: str, local_first: bool
) -> None:
    """Regression: an input read by an operator on its own worker and by an exchange (or a
    broadcast) to another process handed the batch to the first consumer before the second
    refused it: the send raised, yet one branch of the dataflow had the batch (with the
    unsendable record) and the other not."""
    local: list[Any] = []
    crossed: list[Any] = []
    async with naiad.Runtime(**TWO_PROCESSES) as rt:

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            routed = (
                (lambda: stream.exchange(lambda r: 1)) if remote == "exchange" else stream.broadcast
            )
            if local_first:
                stream.inspect(local.append)
                routed().inspect(crossed.append)
            else:
                routed().inspect(crossed.append)
                stream.inspect(local.append)
            return handle

        df = rt.dataflow(build)
        first, second = df.results
        second.close()
        first.send(["before"])
        with pytest.raises(TypeError, match=r"cannot send a builtins\.set between processes"):
            first.send(["refused", {"unsendable"}])
        first.send(["after"])
        first.close()
        await df.finished()
    assert local == ["before", "after"]
    assert sorted(crossed) == (
        ["after", "before"] if remote == "exchange" else ["after"] * 2 + ["before"] * 2
    )


@pytest.mark.parametrize("runtime", [TWO_WORKERS, TWO_PROCESSES], ids=["workers", "processes"])
async def test_a_batch_an_exchange_key_refuses_reaches_none_of_an_inputs_consumers(
    runtime: dict[str, Any],
) -> None:
    """Regression: on several workers of one process, an exchange whose key raised on a
    record refused the send after the input's earlier consumers had the batch."""
    local: list[Any] = []
    routed: list[Any] = []

    def key(record: Any) -> int:
        if record == "refused":
            raise ValueError("no worker for 'refused'")
        return 1

    async with naiad.Runtime(**runtime) as rt:

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            stream.inspect(local.append)
            stream.exchange(key, name="by").inspect(routed.append)
            return handle

        df = rt.dataflow(build)
        first, second = df.results
        second.close()
        first.send(["before"])
        with pytest.raises(ValueError, match="no worker for 'refused'") as info:
            first.send(["fine", "refused"])
        assert "naiad: while routing records to operator 'by'" in info.value.__notes__
        first.send(["after"])
        first.close()
        await df.finished()
    assert local == ["before", "after"]
    assert routed == ["before", "after"]


async def test_a_session_refuses_a_record_that_cannot_cross_where_it_is_given() -> None:
    """Regression: a hashable record the codec refuses (a frozenset) was staged; every later
    flush then failed after delivering the local part again, and the session could never
    move on. In a cluster it is refused by ``insert``; in one process it is a record."""
    bad = (1, frozenset({"x"}))

    async def run(runtime: dict[str, Any]) -> list[Any]:
        async with naiad.Runtime(**runtime) as rt:

            def build(scope: naiad.Scope) -> tuple[Any, list[Any]]:
                session, records = Collection.new_input(scope)
                return session, records.consolidate().changes()

            df = rt.dataflow(build)
            (session, _), (other, _) = df.results
            other.close()
            for k in range(4):
                session.insert((k, "a"))
            if runtime is TWO_PROCESSES:
                with pytest.raises(TypeError, match="cannot go to another process"):
                    session.insert(bad)
                with pytest.raises(TypeError, match="row 0 of column 1"):
                    session.send_columns((np.array([1]), np.array([frozenset()], object)))
            else:
                session.insert(bad)
                session.remove(bad)
            session.close()
            await df.finished()
        return sorted(c for _, out in df.results for c in out)

    assert await run(TWO_PROCESSES) == await run(TWO_WORKERS)
    assert len(await run(TWO_PROCESSES)) == 4
