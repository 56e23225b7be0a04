"""A function given to a collection's operator that is not one, or takes the wrong number
of arguments, and an iteration body or a variable's result that is not a collection of its
loop, are refused while the dataflow is built, naming the operator; the process goes on
(the next dataflow answers)."""

from __future__ import annotations

from typing import Any

import pytest

import naiad
from naiad.dataflow.scope import BuildError
from naiad.differential import Collection, Variable


def still_works() -> None:
    """A fresh dataflow answers as the reference (recomputed by hand) says."""
    got = naiad.run(
        lambda s: (
            Collection.from_epochs(s, [[(1, 1), (2, 1)], [(1, -1)]])
            .map(lambda x: (x % 2, x))
            .reduce(lambda k, vs: [(sum(v * c for v, c in vs), 1)])
            .changes()
        )
    )
    assert sorted(got[0], key=repr) == sorted(
        [((0, 2), 0, 1), ((1, 1), 0, 1), ((1, 1), 1, -1)], key=repr
    )


def empty(s: naiad.Scope) -> Collection:
    # no record ever arrives: a function used only per record would never be called
    return Collection.from_epochs(s, [[]])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda c: c.map(5), r"^map: f must be a function, not 5$"),
        (lambda c: c.filter("x"), r"^filter: predicate must be a function, not 'x'$"),
        (lambda c: c.flat_map(None), r"^flat_map: f must be a function, not None$"),
        (lambda c: c.map_columns(5), r"^map_columns: f must be a function, not 5$"),
        (lambda c: c.filter_columns(5), r"^filter_columns: predicate must be a function"),
        (lambda c: c.reduce(5), r"^reduce: f must be a function, not 5$"),
        (lambda c: c.iterate(5), r"^iterate: body must be a function, not 5$"),
        (lambda c: c.map(lambda a, b: a), r"^map: f\(record\) is called with 1 argument"),
        (lambda c: c.filter(lambda: 1), r"^filter: predicate\(record\) is called with 1"),
        (lambda c: c.flat_map(lambda a, b: [a]), r"^flat_map: f\(record\) is called with 1"),
        (lambda c: c.reduce(lambda k: []), r"^reduce: f\(key, values\) is called with 2"),
        (
            lambda c: c.arrange_by_key().reduce(lambda k, v, w: []),
            r"^reduce: f\(key, values\) is called with 2",
        ),
        (lambda c: c.iterate(lambda a, b: a), r"^iterate: body\(collection\) is called with 1"),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_function_that_cannot_be_called_so_is_refused_while_building(
    make: Any, message: str, workers: int
) -> None:
    """These passed the build and failed as "'int' object is not callable" or "missing 1
    required positional argument" once a record arrived (a collection that stayed empty
    never said anything was wrong), as timely's map and filter already refused them."""
    with pytest.raises(TypeError, match=message):
        naiad.run(lambda s: make(empty(s)).changes(), workers=workers)
    still_works()


def test_functions_without_a_signature_and_numpy_ufuncs_still_pass() -> None:
    import numpy as np

    got = naiad.run(
        lambda s: (
            Collection.from_epochs(s, [[(-1, 1), (2, 1)]])
            .map(abs)
            .map_columns(np.negative)
            .filter(bool)
            .map(str)
            .changes()
        )
    )
    assert sorted(got[0]) == [("-1", 0, 1), ("-2", 0, 1)]


def arranged(c: Collection) -> Any:
    return c.map(lambda x: (x, x)).arrange_by_key()


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (
            lambda c: None,
            TypeError,
            r"iterate 'it': what body.*returns must be the Collection.* None",
        ),
        (lambda c: [c], TypeError, r"iterate 'it': .* not list$"),
        (arranged, TypeError, r"iterate 'it': .* not Arranged \(an arrangement: return its "),
    ],
)
def test_an_iteration_body_must_return_a_collection_of_its_loop(
    body: Any, error: type, message: str
) -> None:
    """These failed as "'NoneType' object has no attribute 'concat'" (or 'list', or
    'Arranged'), raised by the loop's machinery, naming neither the body nor the loop."""
    with pytest.raises(error, match=message):
        naiad.run(lambda s: empty(s).iterate(body, name="it").changes())
    still_works()


def test_a_body_returning_an_outer_collection_names_the_iteration() -> None:
    """This failed as "operator 'concat' is in scope 'dataflow' but its input stream
    belongs to scope 'dataflow/it'": an operator the user never made."""

    def build(s: naiad.Scope) -> Any:
        outer = empty(s)
        return outer.iterate(lambda c: outer, name="it").changes()

    with pytest.raises(BuildError, match=r"iterate 'it': .* of scope 'dataflow', not of the loop"):
        naiad.run(build)
    still_works()


@pytest.mark.parametrize("how", ["none", "outer", "twice"])
def test_a_variable_is_set_once_to_a_collection_of_its_loop(how: str) -> None:
    """set(None) failed with "'NoneType' object has no attribute 'concat'", an outer
    collection blamed the variable's internal 'concat', and a second set() was refused as
    "feedback 'v' is already connected" after building its consolidation."""

    def build(s: naiad.Scope) -> Any:
        loop = s.iterative("loop")
        outer = Collection.from_epochs(s, [[(1, 1)]])
        v = Variable(loop, outer.enter(loop), name="v")
        if how == "none":
            v.set(None)  # type: ignore[arg-type]
        elif how == "outer":
            v.set(outer)
        else:
            v.set(v.collection.distinct())
            v.set(v.collection.distinct())
        return v.collection.leave().changes()

    error, message = {
        "none": (TypeError, r"variable 'v': the result given to set\(\) must be the Collection"),
        "outer": (BuildError, r"variable 'v': .* of scope 'dataflow', not of the loop"),
        "twice": (BuildError, r"variable 'v' is set twice"),
    }[how]
    with pytest.raises(error, match=message):
        naiad.run(build)
    still_works()


def timely(c: Collection) -> Any:
    return c.scope.from_epochs([[1]])


SIDE = r"must be a Collection or an Arranged of this dataflow, not"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda c: c.join([1]), rf"^join: the other side {SIDE} list$"),
        (lambda c: c.join(timely(c)), rf"^join: the other side {SIDE} Stream \(a timely stream"),
        (lambda c: c.join_map(None, lambda k, a, b: k), rf"^join_map: the other side {SIDE} None$"),
        (lambda c: c.join_core(3, lambda k, a, b: [k]), rf"^join_core: the other side {SIDE} int$"),
        (lambda c: c.semijoin([1]), rf"^semijoin: the other side {SIDE} list$"),
        (lambda c: c.antijoin({1}), rf"^antijoin: the other side {SIDE} set$"),
        (lambda c: c.arrange_by_key().join([1]), rf"^join: the other side {SIDE} list$"),
        (lambda c: c.arrange_by_key().join(timely(c)), rf"^join: the other side {SIDE} Stream"),
        (lambda c: c.arrange_by_key().semijoin("k"), rf"^semijoin: the other side {SIDE} str$"),
        (lambda c: c.arrange_by_key().antijoin([1]), rf"^antijoin: the other side {SIDE} list$"),
        (
            lambda c: c.arrange_by_key().join_map([1], lambda k, a, b: k),
            rf"^join_map: the other side {SIDE} list$",
        ),
        (
            lambda c: c.concat(timely(c)),
            r"^concat: the other side must be a Collection of this dataflow, not Stream \(a timely",
        ),
        (
            lambda c: c.concat(c, [c]),
            r"^concat: .* not list \(collections are passed one argument each: concat\(\*coll",
        ),
        (
            lambda c: c.concat(c.arrange_by_key()),
            r"^concat: .* not Arranged \(an arrangement: pass its \.as_collection\(\)\)$",
        ),
        (lambda c: c.enter(None), r"^enter: expected a loop scope to enter, not None \(a loop: "),
        (lambda c: c.enter(c), r"^enter: expected a loop scope to enter, not Collection"),
        (
            lambda c: c.enter_at(None, lambda x: 0),
            r"^enter_at: expected a loop scope to enter, not None",
        ),
        (
            lambda c: c.enter_prioritized(None, lambda x: 0),
            r"^enter_prioritized: expected a loop scope to enter, not None",
        ),
        (
            lambda c: Variable(None),
            r"^variable 'variable': expected a loop scope to enter, not None",
        ),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_join_or_concat_of_no_collection_is_refused_while_building(
    make: Any, message: str, workers: int
) -> None:
    """These failed as bare AttributeErrors ("'list' object has no attribute 'scope'",
    "'Stream' object has no attribute 'arrange_by_key'" or "... 'stream'", "'NoneType'
    object has no attribute 'path'" or "... 'depth'"), naming neither the operator nor what
    it takes."""
    with pytest.raises(TypeError, match=message):
        naiad.run(lambda s: make(empty(s)), workers=workers)
    still_works()


def test_joins_and_concat_of_collections_and_arrangements_still_pass() -> None:
    def build(s: naiad.Scope) -> Any:
        a = Collection.from_epochs(s, [[((1, "a"), 1), ((2, "b"), 1)]])
        keys = Collection.from_epochs(s, [[(1, 1)]])
        return (
            a.join(keys.map(lambda k: (k, "x")))
            .concat(a.arrange_by_key().semijoin(keys), a.antijoin(keys.arrange_by_self()))
            .consolidate()
            .changes()
        )

    got = naiad.run(build, workers=2)
    assert sorted(got[0] + got[1], key=repr) == sorted(
        [((1, "a", "x"), 0, 1), ((1, "a"), 0, 1), ((2, "b"), 0, 1)], key=repr
    )
