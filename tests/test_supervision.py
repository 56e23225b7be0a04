"""An exception in user code stops the dataflow and reaches the caller as itself, with the
user's own line in the traceback and a note naming the operator, the worker and the time."""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

import pytest

import naiad
from naiad.differential import Collection


def explode(x: int) -> int:
    if x == 3:
        raise ZeroDivisionError("user bug on record 3")  # the user's own line
    return x


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_user_exception_reaches_run_with_its_traceback(workers: int) -> None:
    with pytest.raises(ZeroDivisionError) as info:
        naiad.run(
            lambda s: s.from_epochs([[1, 2], [3, 4]]).map(explode, name="Explode").collect(),
            workers=workers,
        )
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any(f.name == "explode" and "user's own line" in (f.line or "") for f in frames)
    notes = "\n".join(info.value.__notes__)
    assert "'Explode'" in notes and "at time 1" in notes and "receiving a message" in notes


class FailsOnFrontier(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        pass

    def on_frontier(self) -> None:
        raise KeyError("frontier")


def test_exception_in_on_frontier_is_noted_without_a_time() -> None:
    """Regression: the note ended "observing its frontier at time None"."""
    with pytest.raises(KeyError) as info:
        naiad.run(lambda s: s.from_epochs([[1]]).unary(FailsOnFrontier(), name="Watcher"))
    assert "naiad: raised in operator 'Watcher' on worker 0 observing its frontier" in (
        info.value.__notes__
    )


class FailsOnNotify(naiad.Vertex):
    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.notify_at(cap)

    def on_notify(self, cap: naiad.Capability) -> None:
        raise KeyError(f"missing state for {cap.time}")


def test_exception_in_on_notify_is_noted_with_the_time() -> None:
    with pytest.raises(KeyError) as info:
        naiad.run(lambda s: s.from_epochs([[], [1]]).unary(FailsOnNotify(), name="Notified"))
    assert "naiad: raised in operator 'Notified' on worker 0 being notified at time 1" in (
        info.value.__notes__
    )


async def test_exception_reaches_awaiting_probe_and_runtime_exit() -> None:
    with pytest.raises(ValueError, match="bad record") as info:
        async with naiad.Runtime(workers=2) as rt:

            def build(s: naiad.Scope) -> tuple[naiad.InputHandle, naiad.ProbeHandle]:
                handle, stream = s.new_input()

                def check(x: int) -> int:
                    if x < 0:
                        raise ValueError("bad record")
                    return x

                return handle, stream.map(check).probe()

            df = rt.dataflow(build)
            handle, probe = df.results[0]
            handle.send([1, 2])
            for h, _ in df.results:
                h.advance_to(1)
            await probe.wait(0)  # epoch 0 completes normally
            handle.send([-1])
            for h, _ in df.results:
                h.advance_to(2)
            with pytest.raises(ValueError, match="bad record"):
                await probe.wait(1)
    assert "map" in "\n".join(info.value.__notes__)


def test_exception_while_starting_reaches_the_builder() -> None:
    class BadStart(naiad.Vertex):
        def on_start(self, cap: naiad.Capability) -> None:
            raise RuntimeError("cannot open the source")

    with pytest.raises(RuntimeError, match="cannot open the source") as info:
        naiad.run(lambda s: s.from_epochs([[1]]).unary(BadStart(), name="Source"))
    assert (
        "naiad: raised in operator 'Source' on worker 0 starting at time 0" in info.value.__notes__
    )


def test_a_stop_iteration_in_map_is_an_error_not_the_end_of_the_batch() -> None:
    """Regression: ``list(map(f, batch))`` took a StopIteration raised by ``f`` for the end
    of the batch: the rest of the batch vanished and the run succeeded."""

    def f(x: int) -> int:
        if x == 2:
            next(iter([]))
        return x * 10

    with pytest.raises(RuntimeError, match="operator 'map' raised StopIteration") as info:
        naiad.run(lambda s: s.from_epochs([[1, 2, 3, 4]]).map(f).collect())
    assert isinstance(info.value.__cause__, StopIteration)
    assert any("operator 'map' on worker 0" in n for n in info.value.__notes__)


@pytest.mark.parametrize("config", [{"workers": 2}, {"processes": 2, "transport": "inproc"}])
async def test_inputs_refuse_data_once_the_runtime_has_failed(config: dict[str, Any]) -> None:
    """Regression: after a callback raised, ``send``, ``advance_to`` and a session's
    ``insert``/``flush`` returned normally and the data went nowhere."""
    with pytest.raises(ValueError, match="bad record"):
        async with naiad.Runtime(**config) as rt:

            def build(s: naiad.Scope) -> Any:
                handle, stream = s.new_input("plain")
                session, collection = Collection.new_input(s, "updates")
                collection.probe()
                return handle, session, stream.map(explode_on_negative).probe()

            df = rt.dataflow(build)
            handle, session, probe = df.results[0]
            session.insert("staged")  # buffered before the failure: flush has it to send
            handle.send([-1])
            for h, _, _ in df.results:
                h.advance_to(1)
            with pytest.raises(ValueError, match="bad record"):
                await probe.wait(0)
            calls = [
                ("plain", lambda: handle.send([1])),
                ("plain", lambda: handle.advance_to(5)),
                ("updates", lambda: session.insert("x")),
                ("updates", session.flush),
                ("updates", lambda: session.advance_to(5)),
            ]
            for name, call in calls:
                with pytest.raises(naiad.DataflowStopped) as info:
                    call()
                assert str(info.value) == (
                    f"input {name!r}: the runtime has stopped after an error: "
                    f"ValueError: bad record"
                )
                assert isinstance(info.value.__cause__, ValueError)
            with pytest.raises(naiad.DataflowStopped, match="cannot build dataflow"):
                rt.dataflow(build)


def explode_on_negative(x: int) -> int:
    if x < 0:
        raise ValueError("bad record")
    return x


@pytest.mark.parametrize("kind", [asyncio.CancelledError, GeneratorExit])
@pytest.mark.parametrize("config", [{"workers": 2}, {"processes": 2, "transport": "inproc"}])
def test_a_callback_raising_what_ends_a_coroutine_fails_the_runtime(
    kind: type[BaseException], config: dict[str, Any]
) -> None:
    """Regression: a CancelledError (a cancelled future's ``result()``, say) or GeneratorExit
    raised by a map function ended the workers' task silently, as if cancelled: the runtime
    never learnt of it and waited forever for the dataflow."""

    def f(x: int) -> int:
        if x == 3:
            raise kind("from the user's function")
        return x

    async def main() -> None:
        async with naiad.Runtime(**config) as rt:
            df = rt.dataflow(lambda s: s.from_epochs([[1, 2, 3, 4]]).map(f, name="Mapper"))
            await asyncio.wait_for(df.finished(), 10)  # bounds a hang only

    with pytest.raises(RuntimeError, match=f"operator 'Mapper' raised {kind.__name__}") as info:
        asyncio.run(main())
    assert isinstance(info.value.__cause__, kind)
    assert any("operator 'Mapper' on worker" in n for n in info.value.__notes__)
