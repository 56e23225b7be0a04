"""Path summaries: composition, the conservative order, monotonicity."""

from __future__ import annotations

from functools import reduce

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.progress.summary import PathSummary
from naiad.progress.timestamp import Lex, Product, depth, less_equal

SETTINGS = settings(max_examples=60, deadline=None, database=None)

small = st.integers(0, 6)
time_classes = st.sampled_from([Product, Lex])


@st.composite
def times(draw, shape):
    """A time whose loop coordinates have the classes ``shape`` (outermost first)."""
    t = draw(small)
    for cls in shape:
        t = cls(t, draw(small))
    return t


@st.composite
def shapes(draw, min_depth=0, max_depth=3):
    return tuple(draw(st.lists(time_classes, min_size=min_depth, max_size=max_depth)))


def shape_of(t):
    classes = []
    while not isinstance(t, int):
        classes.append(t.__class__)
        t = t.outer
    return tuple(reversed(classes))


@st.composite
def step_sequences(draw, start_depth, max_len=7, max_depth=4):
    """Elementary steps valid from ``start_depth``; returns (steps, final depth)."""
    steps = []
    d = start_depth
    for _ in range(draw(st.integers(0, max_len))):
        options = ["feedback"]
        if d < max_depth:
            options += ["ingress_product", "ingress_lex"]
        if d > 0:
            options.append("egress")
        kind = draw(st.sampled_from(options))
        if kind == "feedback":
            steps.append(PathSummary.feedback(draw(st.integers(1, 3))))
        elif kind == "ingress_product":
            steps.append(PathSummary.ingress(Product))
            d += 1
        elif kind == "ingress_lex":
            steps.append(PathSummary.ingress(Lex))
            d += 1
        else:
            steps.append(PathSummary.egress())
            d -= 1
    return steps, d


def apply_all(steps, t):
    for s in steps:
        t = s.apply(t)
    return t


def compose(steps):
    return reduce(PathSummary.then, steps, PathSummary.identity())


# --------------------------------------------------------------------------- elementary steps


@SETTINGS
@given(data=st.data())
def test_elementary_steps(data):
    shape = data.draw(shapes(min_depth=1))
    t = data.draw(times(shape))
    k = data.draw(st.integers(1, 5))
    # repr, not ==: Product(1, 2) == Lex(1, 2) as tuples, but the class is the order
    assert repr(PathSummary.ingress().apply(t)) == repr(Product(t, 0))
    assert repr(PathSummary.ingress(Lex).apply(t)) == repr(Lex(t, 0))
    assert repr(PathSummary.egress().apply(t)) == repr(t.outer)
    assert repr(PathSummary.feedback(k).apply(t)) == repr(t.__class__(t.outer, t.inner + k))
    assert repr(PathSummary.identity().apply(t)) == repr(t)
    assert PathSummary.feedback(k).apply(3) == 3 + k
    # composed summaries keep every coordinate's class
    s = PathSummary.egress().then(PathSummary.ingress(Lex)).then(PathSummary.feedback(k))
    s = s.then(PathSummary.ingress(Product)).then(PathSummary.feedback(1))
    assert repr(s.apply(t)) == repr(Product(Lex(t.outer, k), 1))


@pytest.mark.parametrize("step", [0, -1, -5])
def test_feedback_must_advance(step):
    with pytest.raises(ValueError):
        PathSummary.feedback(step)


def test_feedback_default_and_flags():
    assert PathSummary.feedback() == PathSummary.feedback(1)
    assert PathSummary.feedback(2).advances
    assert not PathSummary.ingress().advances
    assert not PathSummary.egress().advances
    assert PathSummary.identity().is_identity
    assert not PathSummary.ingress().is_identity
    assert PathSummary.ingress().then(PathSummary.egress()).is_identity


# --------------------------------------------------------------------------- composition


@SETTINGS
@given(data=st.data())
def test_then_is_sequential_application(data):
    shape = data.draw(shapes())
    t = data.draw(times(shape))
    steps1, d1 = data.draw(step_sequences(len(shape)))
    steps2, _ = data.draw(step_sequences(d1))
    s1, s2 = compose(steps1), compose(steps2)
    # The normal form of a sequence behaves like the sequence (repr: classes must match too)
    assert repr(s1.apply(t)) == repr(apply_all(steps1, t))
    mid = s1.apply(t)
    assert depth(mid) == d1
    assert repr(s1.then(s2).apply(t)) == repr(s2.apply(mid))
    assert repr(s1.then(s2).apply(t)) == repr(apply_all(steps1 + steps2, t))
    # and composing left-to-right or right-to-left gives the same normal form
    right = reduce(lambda acc, s: s.then(acc), reversed(steps1 + steps2), PathSummary.identity())
    assert right == s1.then(s2)


@SETTINGS
@given(data=st.data())
def test_then_is_associative(data):
    shape = data.draw(shapes())
    t = data.draw(times(shape))
    steps1, d1 = data.draw(step_sequences(len(shape)))
    steps2, d2 = data.draw(step_sequences(d1))
    steps3, _ = data.draw(step_sequences(d2))
    a, b, c = compose(steps1), compose(steps2), compose(steps3)
    left, right = a.then(b).then(c), a.then(b.then(c))
    assert left == right
    assert repr(left.apply(t)) == repr(apply_all(steps1 + steps2 + steps3, t))


@SETTINGS
@given(data=st.data())
def test_identity_is_neutral(data):
    shape = data.draw(shapes())
    steps, _ = data.draw(step_sequences(len(shape)))
    s = compose(steps)
    assert PathSummary.identity().then(s) == s
    assert s.then(PathSummary.identity()) == s


def test_documented_example():
    around = PathSummary.egress().then(PathSummary.feedback(1)).then(PathSummary.ingress())
    assert around == PathSummary(1, 1, ((Product, 0),))
    assert around.apply(Product(Product(0, 4), 9)) == Product(Product(0, 5), 0)
    inside = PathSummary.ingress().then(PathSummary.feedback(2)).then(PathSummary.egress())
    assert inside.is_identity


# --------------------------------------------------------------------------- the order


@st.composite
def normal_forms(draw, max_pops=2, max_pushes=2):
    pops = draw(st.integers(0, max_pops))
    add = draw(st.integers(0, 3))
    pushes = tuple(draw(st.lists(st.tuples(time_classes, st.integers(0, 3)), max_size=max_pushes)))
    return PathSummary(pops, add, pushes)


@st.composite
def larger_same_shape(draw, s):
    """A summary of the same shape as ``s`` whose numbers are no smaller."""
    add = s.add + draw(st.integers(0, 2))
    pushes = tuple((cls, v + draw(st.integers(0, 2))) for cls, v in s.pushes)
    return PathSummary(s.pops, add, pushes)


@SETTINGS
@given(data=st.data())
def test_summary_order_is_sound(data):
    s1 = data.draw(normal_forms())
    s2 = data.draw(st.one_of(larger_same_shape(s1), normal_forms()))
    shape = data.draw(shapes(min_depth=s1.pops, max_depth=s1.pops + 2))
    t = data.draw(times(shape))
    assert s1.less_equal(s1)
    if s1.less_equal(s2):
        a, b = s1.apply(t), s2.apply(t)
        assert shape_of(a) == shape_of(b)
        assert less_equal(a, b), (s1, s2, t)
        if s2.less_equal(s1):
            assert s1 == s2
    if s1.pops != s2.pops or [c for c, _ in s1.pushes] != [c for c, _ in s2.pushes]:
        assert not s1.less_equal(s2)


@SETTINGS
@given(data=st.data())
def test_summary_order_is_sound_for_step_sequences(data):
    shape = data.draw(shapes())
    steps, _ = data.draw(step_sequences(len(shape)))
    s1 = compose(steps)
    s2 = data.draw(larger_same_shape(s1))
    assert s1.less_equal(s2)
    for t in [data.draw(times(shape)) for _ in range(3)]:
        assert less_equal(s1.apply(t), s2.apply(t))
    # following a feedback afterwards makes a summary strictly larger
    s3 = s1.then(PathSummary.feedback(1))
    assert s1.less_equal(s3) and not s3.less_equal(s1)


def test_order_distinguishes_classes_and_shapes():
    assert not PathSummary.ingress(Product).less_equal(PathSummary.ingress(Lex))
    assert not PathSummary.identity().less_equal(PathSummary.ingress())
    assert not PathSummary.egress().less_equal(PathSummary.identity())
    assert PathSummary.identity().less_equal(PathSummary.feedback(1))
    assert not PathSummary.feedback(1).less_equal(PathSummary.identity())


@st.composite
def bumped(draw, t):
    """A time at or after ``t`` in the partial order (coordinates increased)."""
    if isinstance(t, int):
        return t + draw(st.integers(0, 2))
    if isinstance(t, Lex) and draw(st.booleans()):
        # strictly larger outer part: the inner counter may go down
        outer = bumped_strict(t.outer, draw)
        return Lex(outer, draw(small))
    return t.__class__(draw(bumped(t.outer)), t.inner + draw(st.integers(0, 2)))


def bumped_strict(t, draw):
    if isinstance(t, int):
        return t + draw(st.integers(1, 2))
    return t.__class__(t.outer, t.inner + draw(st.integers(1, 2)))


@SETTINGS
@given(data=st.data())
def test_summaries_are_monotone(data):
    shape = data.draw(shapes())
    t1 = data.draw(times(shape))
    t2 = data.draw(st.one_of(bumped(t1), times(shape)))
    steps, _ = data.draw(step_sequences(len(shape)))
    s = compose(steps)
    if less_equal(t1, t2):
        assert less_equal(s.apply(t1), s.apply(t2)), (s, t1, t2)
        # every elementary step on the way is monotone too
        a, b = t1, t2
        for step in steps:
            a, b = step.apply(a), step.apply(b)
            assert less_equal(a, b), (step, a, b)
