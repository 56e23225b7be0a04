"""Each API misuse of ARCHITECTURE.md's list raises a clear error naming operator and time,
reaches the caller, and leaves the process able to run the next dataflow."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import naiad
from naiad import BuildError, CapabilityError, InputError
from naiad.differential import Collection, Variable


def still_works() -> None:
    assert naiad.run(lambda s: s.from_epochs([[1, 2]]).map(lambda x: x + 1).collect()) == [
        [(0, 2), (0, 3)]
    ]


class SendsBackwards(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap.time - 1, batch)


def test_sending_backwards_in_time_names_operator_and_times() -> None:
    with pytest.raises(CapabilityError) as info:
        naiad.run(lambda s: s.from_epochs([[], [], [7]]).unary(SendsBackwards(), name="Back"))
    message = str(info.value)
    assert "'Back'" in message and "backwards" in message
    assert "time 1" in message and "time 2" in message
    still_works()


class KeepsBorrowed(naiad.Vertex):
    """Keeps the borrowed capability of a message and uses it in a later callback."""

    def __init__(self) -> None:
        self.kept: naiad.Capability | None = None

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        if self.kept is None:
            self.kept = cap
        else:
            self.send(self.kept, batch)


def test_sending_with_a_released_capability_is_rejected() -> None:
    with pytest.raises(CapabilityError) as info:
        naiad.run(lambda s: s.from_epochs([[1], [2]]).unary(KeepsBorrowed(), name="Keeper"))
    message = str(info.value)
    assert "'Keeper'" in message and "time 0" in message and "retain()" in message
    still_works()


class SendsOutsideCallbacks(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        pass

    def on_frontier(self) -> None:
        self.send(5, [1])  # no callback capability here: a frontier change is not a message


def test_sending_at_a_time_without_any_capability_is_rejected() -> None:
    with pytest.raises(CapabilityError, match=r"'Loose'.*time 5.*needs a capability"):
        naiad.run(lambda s: s.from_epochs([[1]]).unary(SendsOutsideCallbacks(), name="Loose"))
    still_works()


class Holder(naiad.Vertex):
    def on_start(self, cap: naiad.Capability) -> None:
        self.cap = cap.retain()

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        pass


def test_a_capability_of_another_operator_is_rejected() -> None:
    def build(s: naiad.Scope) -> None:
        holder = Holder()
        s.from_epochs([[1]]).unary(holder, name="Holder")

        class UsesHolders(naiad.Vertex):
            def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
                self.send(holder.cap, batch)

        s.from_epochs([[1]]).unary(UsesHolders(), name="Borrower")

    with pytest.raises(CapabilityError, match=r"'Borrower'.*belongs to operator 'Holder'"):
        naiad.run(build)
    still_works()


async def test_advancing_an_input_backwards_is_rejected_and_loses_nothing() -> None:
    async with naiad.Runtime() as rt:
        handle, out = rt.dataflow(
            lambda s: (lambda h, st: (h, st.collect()))(*s.new_input("words"))
        ).results[0]
        handle.send(["a"])
        handle.advance_to(3)
        with pytest.raises(InputError, match=r"'words'.*from epoch 3 to 1.*backwards"):
            handle.advance_to(1)
        handle.send(["b"])  # the handle still works at epoch 3
        assert handle.epoch == 3
    assert out == [(0, "a"), (3, "b")]


async def test_epochs_and_probe_times_must_be_integers_and_numpy_integers_are() -> None:
    """A float epoch passed the order checks and became a float time in the frontiers; a
    numpy integer, as an epoch taken from an array, failed with an AttributeError."""
    async with naiad.Runtime() as rt:
        handle, out, probe = rt.dataflow(
            lambda s: (lambda h, st: (h, st.collect(), st.probe()))(*s.new_input("ticks"))
        ).results[0]
        handle.send(["a"])
        handle.advance_to(np.int64(2))
        assert handle.epoch == 2 and type(handle.epoch) is int
        for bad in (2.5, True, "3"):
            with pytest.raises(TypeError, match=r"'ticks': an epoch must be an integer"):
                handle.advance_to(bad)
        with pytest.raises(TypeError, match=r"a probe's time must be an integer, not 1\.5"):
            await probe.wait(1.5)
        handle.send(["b"])  # the handle still works at epoch 2
        handle.advance_to(3)
        await probe.wait(np.int64(2))
        assert not probe.less_equal(np.int64(2)) and probe.less_equal(3)
    assert out == [(0, "a"), (2, "b")]


async def test_sending_after_close_is_rejected() -> None:
    async with naiad.Runtime() as rt:
        handle, _ = rt.dataflow(lambda s: s.new_input("events")).results[0]
        handle.close()
        handle.close()  # idempotent
        with pytest.raises(InputError, match="'events' is closed"):
            handle.send([1])


def test_feedback_that_does_not_advance_is_rejected() -> None:
    def build(s: naiad.Scope) -> None:
        with s.iterative() as loop:
            loop.feedback(step=0, name="stuck")

    with pytest.raises(BuildError, match=r"'stuck'.*at least 1"):
        naiad.run(build)
    still_works()


@pytest.mark.parametrize("step", [1.5, "1", True])
def test_a_feedback_step_that_is_not_an_integer_is_rejected(step: Any) -> None:
    """Regression: 1.5 made float loop counters (a cluster then failed on a 'malformed
    progress update' blamed on the peer)."""

    def build(s: naiad.Scope) -> None:
        with s.iterative() as loop:
            loop.feedback(step=step, name="odd")

    with pytest.raises(BuildError, match=r"'odd': step must be an integer"):
        naiad.run(build)

    def variable(s: naiad.Scope) -> None:
        loop = s.iterative("v")
        Variable(loop, Collection.from_epochs(s, [[(1, 1)]]).enter(loop), step=step)

    with pytest.raises(BuildError, match=r"step must be an integer"):
        naiad.run(variable)
    still_works()


@pytest.mark.parametrize("runtime", [{"workers": 1}, {"workers": 1, "processes": 2}])
def test_a_numpy_feedback_step_counts_like_an_int(runtime: dict[str, Any]) -> None:
    """Regression: np.int64(1) made numpy loop counters, which a cluster could not send."""

    def build(s: naiad.Scope) -> Any:
        with s.iterative() as loop:
            handle, cycle = loop.feedback(step=np.int64(1))
            body = s.from_epochs([[3]]).enter(loop).concat(cycle)
            body.filter(lambda x: x > 0).map(lambda x: x - 1).exchange(lambda x: x).connect_loop(
                handle
            )
            return body.leave().collect()

    out = naiad.run(build, **runtime, transport="inproc")
    assert sorted(x for worker in out for _, x in worker) == [0, 1, 2, 3]


def nothing_enters(s: naiad.Scope) -> Any:
    with s.iterative() as loop:
        handle, cycle = loop.feedback()
        cycle.map(lambda x: x + 1).connect_loop(handle)
    return cycle.leave().collect()


@pytest.mark.parametrize("build", [nothing_enters, lambda s: None])
@pytest.mark.parametrize("runtime", [{"workers": 2}, {"workers": 1, "processes": 2}])
def test_a_dataflow_where_nothing_can_happen_finishes(build: Any, runtime: dict[str, Any]) -> None:
    """Regression: with no input or source nothing ever held a pointstamp, no frontier moved
    and completion was never checked: ``naiad.run`` waited forever."""

    async def main() -> list[Any]:
        async with naiad.Runtime(**runtime, transport="inproc") as rt:
            df = rt.dataflow(build)
            await asyncio.wait_for(df.finished(), 30)
            return df.results

    assert asyncio.run(main()) in ([[], []], [None, None])


def test_a_cycle_without_feedback_is_rejected_by_the_graph_builder() -> None:
    g = naiad.progress.GraphBuilder()
    a = g.add_node("A", 1, 1)
    b = g.add_node("B", 1, 1)
    g.add_edge((a, 0), (b, 0))
    g.add_edge((b, 0), (a, 0))
    with pytest.raises(naiad.CycleError, match=r"'A' -> 'B' -> 'A'|'B' -> 'A' -> 'B'"):
        g.build()


def test_an_unconnected_feedback_is_rejected() -> None:
    def build(s: naiad.Scope) -> None:
        with s.iterative() as loop:
            loop.feedback(name="dangling")

    with pytest.raises(BuildError, match="'dangling' was never connected"):
        naiad.run(build)


def test_streams_cannot_cross_scopes_without_enter_or_leave() -> None:
    def build(s: naiad.Scope) -> None:
        outer = s.from_epochs([[1]])
        with s.iterative(name="inner") as loop:
            _, cycle = loop.feedback()
            outer.concat(cycle)  # forgot .enter(loop)

    with pytest.raises(BuildError, match=r"'concat'.*scope 'dataflow'.*'dataflow/inner'"):
        naiad.run(build)


def test_mismatched_dataflows_on_different_workers_are_rejected() -> None:
    def build(s: naiad.Scope) -> None:
        stream = s.from_epochs([[1]])
        if s.index == 1:
            stream = stream.map(lambda x: x)
        stream.collect()

    with pytest.raises(BuildError, match=r"worker 1 built a different dataflow.*'map'"):
        naiad.run(build, workers=2)
    still_works()


def test_the_event_loop_survives_a_failed_runtime() -> None:
    async def main() -> list[Any]:
        with pytest.raises(CapabilityError):
            async with naiad.Runtime() as rt:
                rt.dataflow(lambda s: s.from_epochs([[], [1]]).unary(SendsBackwards()))
        async with naiad.Runtime(workers=2) as rt:
            df = rt.dataflow(lambda s: s.from_epochs([[1, 2, 3]]).collect())
        return sorted(r for part in df.results for _, r in part)

    assert asyncio.run(main()) == [1, 2, 3]


@pytest.mark.parametrize("records", [[1.5, 2.5], ["a", "b"]])
def test_an_exchange_key_that_is_not_an_integer_is_named(records: list[Any]) -> None:
    with pytest.raises(TypeError, match=r"key\(record\) must return an integer, not") as info:
        naiad.run(
            lambda s: s.from_epochs([records]).exchange(key=lambda x: x, name="by_value").collect(),
            workers=2,
        )
    notes = "".join(getattr(info.value, "__notes__", []))
    assert "naiad: raised in operator 'from_epochs'" in notes
    # the exchange itself is named too (its error said only "exchange:")
    assert "while routing records to operator 'by_value'" in notes
    still_works()


@pytest.mark.parametrize(
    "keys",
    [
        lambda b: b * 0.5,  # floats were truncated: routed silently, unlike with key=
        lambda b: np.full(len(b), np.nan),  # NaN became INT64_MIN, with a RuntimeWarning only
        lambda b: ["a"] * len(b),  # "invalid literal for int() with base 10: 'a'"
        lambda b: 1,  # "object of type 'numpy.uint8' has no len()"
        lambda b: [2**70] * len(b),  # "Python int too large to convert to C long"
    ],
)
def test_exchange_keys_that_are_not_integers_are_named(keys: Any) -> None:
    with pytest.raises(TypeError, match=r"keys\(batch\) must return a 1-d array of integers"):
        naiad.run(lambda s: s.from_epochs([np.arange(1, 7)]).exchange(keys=keys).probe(), workers=2)
    # unsigned and narrow integers, and negative ones, route as with key=
    out = naiad.run(
        lambda s: (
            s.from_epochs([np.arange(-3, 3)])
            .exchange(keys=lambda b: b.astype(np.int8))
            .map(int)
            .collect()
        ),
        workers=2,
    )
    assert [sorted(r for _, r in part) for part in out] == [[-2, 0, 2], [-3, -1, 1]]
    still_works()


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"workers": "2"}, TypeError, "workers must be an integer, not '2'"),
        ({"workers": 2.0}, TypeError, r"workers must be an integer, not 2\.0"),
        ({"processes": True}, TypeError, "processes must be an integer, not True"),
        ({"workers": 0}, ValueError, "at least 1"),
        ({"transport": "udp"}, ValueError, "transport must be one of"),
    ],
)
def test_runtime_options_are_checked(options: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        naiad.run(lambda s: s.from_epochs([[1]]).collect(), **options)
    assert naiad.run(lambda s: s.from_epochs([[1]]).collect(), workers=np.int64(2)) == [
        [(0, 1)],
        [],
    ]


def test_sibling_loops_of_one_name_are_told_apart_in_errors() -> None:
    def build(scope: naiad.Scope) -> Any:
        first, second = scope.iterative(), scope.iterative()
        inside_first = Collection.from_epochs(scope, [[(1, 1)]]).enter(first)
        return inside_first.enter(second).leave().leave().changes()

    with pytest.raises(ValueError, match="loop 'dataflow/loop#2' is not nested inside the "):
        naiad.run(build)
    still_works()


class SendsNone(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap, None)


class SendsOnAMissingPort(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap, batch, port=3)


@pytest.mark.parametrize(
    ("vertex", "error", "message"),
    [
        (SendsNone(), TypeError, "operator 'mine' sent NoneType None: a batch is a list"),
        (SendsOnAMissingPort(), ValueError, "'mine' has 1 output.*cannot send on output 3"),
    ],
)
def test_a_bad_send_names_the_sender(vertex: naiad.Vertex, error: type, message: str) -> None:
    """Sending None reached the downstream operator, which failed under its own name; a
    missing port was a bare IndexError."""
    with pytest.raises(error, match=message) as info:
        naiad.run(lambda s: s.from_epochs([[1]]).unary(vertex, name="mine").collect())
    assert "'mine'" in "".join(getattr(info.value, "__notes__", []))
    still_works()


async def test_a_runtime_that_has_stopped_says_so() -> None:
    """Regression: after its ``async with`` block a runtime accepted dataflows that never
    ran, and a second ``async with`` hung on exit."""
    rt = naiad.Runtime()
    async with rt:
        pass
    with pytest.raises(RuntimeError, match="runtime has stopped"):
        rt.dataflow(lambda s: s.from_epochs([[1]]).collect())
    with pytest.raises(RuntimeError, match="a runtime runs once"):
        async with rt:
            pass


async def test_run_inside_a_running_event_loop_says_what_to_use_instead() -> None:
    """Regression: ``naiad.run`` from async code (a Jupyter notebook runs an event loop)
    failed with asyncio's 'Runner.run() cannot be called from a running event loop', hidden
    behind a second error from closing the unused loop ('Cannot run the event loop while
    another loop is running') and warnings of coroutines never awaited."""
    with pytest.raises(RuntimeError, match="cannot be called from async code") as info:
        naiad.run(lambda s: s.from_epochs([[1]]).collect())
    assert "naiad.Runtime" in str(info.value)
    assert info.value.__context__ is None  # the one error, not a chain of two
    async with naiad.Runtime() as rt:  # this loop still runs dataflows
        df = rt.dataflow(lambda s: s.from_epochs([[1]]).collect())
    assert df.results == [[(0, 1)]]


async def test_operators_added_after_the_build_are_refused() -> None:
    """Regression: they were accepted and never ran (records dropped, subscribe silent, a
    probe failing with an AttributeError)."""
    async with naiad.Runtime() as rt:
        df = rt.dataflow(lambda s: s.new_input())
        ((handle, stream),) = df.results
        with pytest.raises(BuildError, match="already built and running: operator 'inspect'"):
            stream.inspect(print)
        with pytest.raises(BuildError, match="already built"):
            stream.probe()
        handle.close()


def test_a_one_shot_iterator_of_epochs_is_refused_for_several_workers() -> None:
    """Regression: the workers shared the iterator, each taking its share of a different
    epoch: records were lost and misplaced."""
    data = [[1, 2, 3, 4], [5, 6]]
    with pytest.raises(BuildError, match="one-shot iterator, but each of the 2 workers"):
        naiad.run(lambda s: s.from_epochs(iter(data)).collect(), workers=2)
    with pytest.raises(BuildError, match="one-shot iterator"):
        naiad.run(lambda s: Collection.from_epochs(s, iter([[(1, 1)]])).changes(), workers=2)
    one = naiad.run(lambda s: s.from_epochs(iter(data)).collect())  # one worker: fine
    assert one == [[(0, 1), (0, 2), (0, 3), (0, 4), (1, 5), (1, 6)]]
    still_works()


def test_a_none_epoch_is_an_error_not_the_end() -> None:
    """Regression: None ended the source silently: the epochs after it were lost."""
    with pytest.raises(TypeError, match=r"epoch 1 is None: an epoch without records is \[\]"):
        naiad.run(lambda s: s.from_epochs([[1], None, [2]]).collect())
    with pytest.raises(TypeError, match="epoch 1 is None"):
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)], None]).changes())
    still_works()


class Pass(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap, batch)


@pytest.mark.parametrize("where", ["two workers", "two operators"])
def test_one_vertex_object_for_two_shards_is_refused(where: str) -> None:
    """Regression: the last shard built took the object over and the other failed with a
    baffling CapabilityError ("the capability ... belongs to operator 'Pass'")."""
    shared = Pass()

    def build(s: naiad.Scope) -> Any:
        out = s.from_epochs([[1, 2]]).unary(shared)
        return (out.unary(shared) if where == "two operators" else out).collect()

    with pytest.raises(BuildError, match="one Pass object is operator 'Pass' on worker 0"):
        naiad.run(build, workers=2 if where == "two workers" else 1)
    still_works()


class SendsAtAnEpoch(naiad.Vertex):
    """Uses a time of the wrong shape: an int inside a loop, a Product at the root."""

    def __init__(self, how: str) -> None:
        self.how = how

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        at: Any = naiad.Product(0, 1) if self.how == "send at the root" else 5
        if self.how == "notify_at":
            self.notify_at(at)
        elif self.how == "delayed":
            cap.delayed(at)
        else:
            self.send(at, batch)

    def on_notify(self, cap: naiad.Capability) -> None:
        pass


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("send", r"'odd': a time to send at inside 1 loop\(s\) must be a Product"),
        ("notify_at", r"'odd': a time inside 1 loop\(s\) must be a Product"),
        ("delayed", r"'odd': a time inside 1 loop\(s\) must be a Product"),
        ("send at the root", r"'odd': a time to send at must be an integer, not Product"),
    ],
)
def test_a_time_of_the_wrong_shape_is_named_where_it_is_given(how: str, message: str) -> None:
    """Regression: a bare AttributeError ("'int' object has no attribute 'inner'") or
    TypeError ("'<=' not supported between 'int' and 'Product'") from the partial order."""

    def build(s: naiad.Scope) -> Any:
        x = s.from_epochs([[1]])
        if how == "send at the root":
            return x.unary(SendsAtAnEpoch(how), name="odd").collect()
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            y = x.enter(loop).concat(cycle).unary(SendsAtAnEpoch(how), name="odd")
            y.filter(lambda v: False).connect_loop(handle)
        return y.leave().collect()

    with pytest.raises(TypeError, match=message) as info:
        naiad.run(build)
    assert "operator 'odd'" in "".join(getattr(info.value, "__notes__", []))
    still_works()


class SendsAtANumpyTime(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(np.int64(cap.time + 1), batch)
        self.notify_at(np.int64(cap.time + 2))

    def on_notify(self, cap: naiad.Capability) -> None:
        self.send(cap, [-cap.time])


@pytest.mark.parametrize("runtime", [{"workers": 2}, {"workers": 1, "processes": 2}])
def test_a_numpy_time_counts_like_an_int(runtime: dict[str, Any]) -> None:
    """Regression: np.int64 times leaked into the output on one process and failed with
    "'numpy.int64' object has no attribute 'less_equal'" across processes."""

    def build(s: naiad.Scope) -> Any:
        return s.from_epochs([[1, 2], [3]]).unary(SendsAtANumpyTime()).exchange(abs).collect()

    out = [r for worker in naiad.run(build, **runtime, transport="inproc") for r in worker]
    records = [r for r in out if r[1] > 0]
    assert sorted(records) == [(1, 1), (1, 2), (2, 3)]
    assert sorted(set(out) - set(records)) == [(2, -2), (3, -3)]  # the notifications
    assert {type(t) for t, _ in out} == {int}


@pytest.mark.parametrize("workers", [1, 2])
def test_an_epoch_that_is_not_a_sequence_is_refused_on_any_number_of_workers(workers: int) -> None:
    """Regression: a set worked on one worker and failed on two ("'set' object is not
    subscriptable"); its order also differs between processes (string hashing), so the
    workers' shares ``batch[w::workers]`` would have lost and duplicated records."""
    for unordered in ({"a", "b"}, {"a": 1}, (x for x in "ab")):
        kind, epochs = type(unordered).__name__, [[], unordered]
        with pytest.raises(TypeError, match=f"from_epochs: epoch 1 is a {kind}, not a seq"):
            naiad.run(lambda s, e=epochs: s.from_epochs(e).collect(), workers=workers)
        with pytest.raises(TypeError, match=f"from_epochs: epoch 1 is a {kind}, not a seq"):
            naiad.run(lambda s, e=epochs: Collection.from_epochs(s, e).changes(), workers=workers)
    ordered = [["a", "b", "c"], ("d", "e"), np.arange(2), range(1)]
    out = naiad.run(lambda s: s.from_epochs(ordered).collect(), workers=workers)
    records = sorted((t, str(r)) for part in out for t, r in part)
    assert records == [
        (0, "a"),
        (0, "b"),
        (0, "c"),
        (1, "d"),
        (1, "e"),
        (2, "0"),
        (2, "1"),
        (3, "0"),
    ]
    still_works()


class Echo(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap, batch)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: s.unary(Echo), r"'Echo': logic is the class Echo; pass an instance"),
        (lambda s: s.unary(lambda p, c, b: None), r"logic must be a naiad\.Vertex, not function"),
        (lambda s: s.unary(Echo(), exchange=5), r"'Echo': exchange must be a key function.*not 5"),
        (lambda s: s.exchange("k"), r"Exchange: key must be a function, not 'k'"),
        (lambda s: s.binary(s, Echo(), exchange=abs), r"'Echo': exchange must be a pair"),
        (lambda s: s.unary(Echo(), outputs=-1), r"'Echo': outputs must be a non-negative integer"),
        (
            lambda s: s.unary(Echo(), outputs=2.0),
            r"outputs must be a non-negative integer, not 2\.0",
        ),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_unusable_operator_arguments_are_refused_while_building(
    build: Any, message: str, workers: int
) -> None:
    """These passed the build: a class or a function as logic failed later with "type object
    has no attribute 'on_start'", outputs=-1 gave an operator without outputs, and a key that
    is not a function was never called on one worker (an exchange there is a pipeline) but
    failed on two, as "'int' object is not callable" raised by the operator upstream."""
    with pytest.raises(TypeError, match=message):
        naiad.run(lambda s: build(s.from_epochs([[1, 2]])), workers=workers)
    assert naiad.run(
        lambda s: s.from_epochs([[1, 2]]).unary(Echo(), exchange=abs, outputs=np.int64(1)).collect()
    ) == [[(0, 1), (0, 2)]]
    still_works()


@pytest.mark.parametrize(
    ("operator", "argument"),
    [
        ("map", "f"),
        ("map_batch", "f"),
        ("filter", "predicate"),
        ("flat_map", "f"),
        ("inspect", "f"),
        ("inspect_batch", "f"),
    ],
)
def test_a_record_function_that_is_not_a_function_is_refused_while_building(
    operator: str, argument: str
) -> None:
    """These passed the build and failed, as "'int' object is not callable", only once a
    record arrived: a stream that carried none (here) never said anything was wrong. The
    other operators (branch, delay, aggregate, ...) already refused it while building."""
    with pytest.raises(TypeError) as info:
        naiad.run(lambda s: getattr(s.from_epochs([[]]), operator)(5, name="Op").collect())
    assert str(info.value) == f"{operator} 'Op': {argument} must be a function, not 5"
    still_works()


@pytest.mark.parametrize("timeout", [0, -1.0, float("inf"), float("nan"), "30", True])
def test_a_connect_timeout_that_is_not_a_number_of_seconds_is_refused(timeout: Any) -> None:
    number = not isinstance(timeout, str | bool)
    with pytest.raises(
        ValueError if number else TypeError,
        match=r"connect_timeout=.*positive finite number" if number else "a number of seconds",
    ):
        naiad.Runtime(connect_timeout=timeout)
    assert naiad.Runtime(connect_timeout=0.5).connect_timeout == 0.5
    still_works()


class SendsAScalarArray(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap, np.asarray(batch[0]))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_0d_array_is_refused_as_one_value_not_a_batch(workers: int) -> None:
    """Regression: a 0-d numpy array (one value) as an epoch, an input's batch or an
    operator's output failed with numpy's "len() of unsized object" or "too many indices for
    array" (h21), which named neither the operator nor the remedy."""
    with pytest.raises(TypeError, match="from_epochs: epoch 1 is a 0-d numpy array, one value"):
        naiad.run(lambda s: s.from_epochs([[], np.array(5)]).collect(), workers=workers)
    with pytest.raises(
        TypeError, match=r"operator 'Scalar' sent ndarray array\(7\), which has no length"
    ):
        naiad.run(
            lambda s: s.from_epochs([[7]]).unary(SendsAScalarArray(), name="Scalar").collect(),
            workers=workers,
        )

    async def an_input() -> list[Any]:
        async with naiad.Runtime(workers=workers) as rt:
            df = rt.dataflow(lambda s: (lambda h, st: (h, st.collect()))(*s.new_input()))
            handle = df.results[0][0]
            with pytest.raises(TypeError, match=r"a 0-d numpy array is one value, not a batch"):
                handle.send(np.array(5))
            handle.send(np.atleast_1d(np.array(5)))  # nothing lost: the handle still works
            for h, _ in df.results[1:]:
                h.close()
            handle.close()
            await df.finished()
            return [(t, int(r)) for _, got in df.results for t, r in got]

    assert asyncio.run(an_input()) == [(0, 5)]
    still_works()


def ask_at_the_next_epoch(self: naiad.Vertex, port: int, cap: naiad.Capability, batch: Any) -> None:
    """An ``on_recv`` that requests a notification at the next epoch, which the input holds
    back, in a vertex without ``on_notify`` to receive it."""
    self.notify_at(cap.time + 1)
    self.send(cap, batch)


def build_asker(scope: naiad.Scope, base: type) -> naiad.InputHandle:
    handle, stream = scope.new_input()
    stream.unary(type("Asker", (base,), {"on_recv": ask_at_the_next_epoch})(), name="Asker")
    return handle


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stateless", [False, True])
def test_a_notification_without_on_notify_is_refused_at_the_request(stateless: bool) -> None:
    """Regression: the inputs of a stateless vertex are not tracked (nothing watches them),
    so its request at a time its input still held back waited for ever (the frontier's move
    past it scheduled no delivery, which would have failed); every vertex without
    ``on_notify`` is now refused when it asks."""
    from naiad.actors.vertex import StatelessVertex

    base = StatelessVertex if stateless else naiad.Vertex

    async def main() -> None:
        async with naiad.Runtime() as rt:
            df = rt.dataflow(lambda scope: build_asker(scope, base))
            handle = df.results[0]
            handle.send([1])  # the request, at 1, while the input holds 0
            await asyncio.sleep(0.05)
            handle.advance_to(5)
            handle.close()
            await asyncio.wait_for(df.finished(), 10)

    # (refused inside the runtime, which stops: the driver's next call names the error)
    with pytest.raises(
        (NotImplementedError, naiad.DataflowStopped), match=r"'Asker'.*requested a notification"
    ):
        asyncio.run(main())
    still_works()
