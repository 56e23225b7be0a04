"""Random differential programs, continued: loops of several ``Variable``s and ``Lex`` loops
nested in loops (drawn often here), and programs fed epoch by epoch through input sessions
in three ways (record by record, numpy columns with ``send_columns``, and ``update_at``
while the session is still at the epoch before), read through ``inspect`` at every node and
through three views of the last node (keeping history, ``history=False``, and one whose
compaction frontier follows the reads). The oracle is the interpreter of
``test_random_programs``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref
from tests.differential.reference import layouts
from tests.differential.test_random_programs import (
    Builder,
    Cycling,
    cases,
    expected,
    run_case,
    share,
)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(cases(loops=True), layouts)
def test_random_loops_of_variables_and_nested_lex_loops(case: Any, layout: Any) -> None:
    a, b, program = case
    run_case(a, b, program, layout)


def send(session: Any, changes: list[tuple[Any, int]], mode: str, epoch: int) -> None:
    if mode == "columns":
        if changes:
            keys = np.array([r[0] for r, _ in changes], dtype=np.int64)
            values = np.array([r[1] for r, _ in changes], dtype=np.int64)
            session.send_columns((keys, values), np.array([d for _, d in changes]))
    elif mode == "ahead":  # the session is at epoch - 1
        for record, diff in changes:
            session.update_at(record, epoch, diff)
    else:
        for record, diff in changes:
            session.update(record, diff)


async def fed(
    a: ref.Epochs, b: ref.Epochs, program: Any, modes: list[str], layout: Any
) -> tuple[list[Any], list[Any], list[dict[Any, int]]]:
    """Runs ``program`` with epoch ``e``'s changes sent as ``modes[e]`` says; returns every
    worker's ``inspect`` updates per node, the three views read at every epoch as it
    completes (the compacted one after moving its frontier to that epoch), and the view
    keeping history read again at every epoch at the end."""
    workers, processes, *_ = layout
    reads: list[Any] = []
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

        def build(scope: Any) -> Any:
            (sa, ca), (sb, cb) = Collection.new_input(scope), Collection.new_input(scope)
            values = Builder(scope, {("A",): ca, ("B",): cb}.__getitem__, None).build(program)
            seen: list[list[Any]] = [[] for _ in values]
            for j, v in enumerate(values):
                v.inspect(seen[j].append)
            last = values[-1]
            return (sa, sb), seen, (last.view(), last.view(history=False), last.view())

        df = rt.dataflow(build)
        mine = df.workers
        peers = workers * processes
        for e in range(len(a)):
            for w in mine:
                for session, changes in zip(df.result(w)[0], (a, b), strict=True):
                    if modes[e] != "ahead":
                        send(session, share(w, peers, changes[e]), modes[e], e)
                    if e + 1 < len(a) and modes[e + 1] == "ahead":
                        send(session, share(w, peers, changes[e + 1]), "ahead", e + 1)
                    session.advance_to(e + 1)
            if 0 in mine:
                views = df.result(0)[2]
                for view in views:
                    await view.wait(e)
                views[2].set_logical_compaction([e])
                reads.append([dict(view.at(e)) for view in views])
        for w in mine:
            for session in df.result(w)[0]:
                session.close()
        await df.finished()
        final = [dict(df.result(0)[2][0].at(e)) for e in range(len(a))] if 0 in mine else []
    return [df.result(w)[1] for w in mine], reads, final


@st.composite
def fed_cases(draw: Any) -> Any:
    a, b, program = draw(cases())
    modes = [draw(st.sampled_from(["update", "columns"]))]
    modes += [draw(st.sampled_from(["update", "columns", "ahead"])) for _ in a[1:]]
    return a, b, program, modes


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(fed_cases(), layouts)
def test_random_programs_fed_by_columns_and_update_at_read_by_inspect_and_views(
    case: Any, layout: Any
) -> None:
    a, b, program, modes = case
    try:
        want = expected(a, b, program)
    except Cycling:
        assume(False)
        return
    seen, reads, final = ref.watchdog(fed(a, b, program, modes, layout))
    for j in range(len(program)):
        got = ref.accumulate_changes([s[j] for s in seen], len(a))
        for e in range(len(a)):
            assert got[e] == want[e][j], (
                f"inspect of node {j} {program[j]!r}: epoch {e}: "
                f"{ref.diff_text(got[e], want[e][j])}"
            )
    for e, views in enumerate(reads):
        for name, view in zip(("history", "latest", "compacted"), views, strict=True):
            assert ref.clean(Counter(view)) == want[e][-1], f"view {name} at {e}"
    for e, view in enumerate(final):
        assert ref.clean(Counter(view)) == want[e][-1], f"view at {e}, read at the end"
