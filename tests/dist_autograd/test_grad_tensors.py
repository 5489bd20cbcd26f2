"""`grad_tensors` finds what pickling sends, in the order the unpickled copy gives too."""
import collections
import dataclasses

import cloudpickle
import pytest

import engine
from engine.dist_autograd.recording import grad_tensors
from tests.dist_autograd.workers import Holder, Pair, Slotted

pytestmark = pytest.mark.timeout(30)


@dataclasses.dataclass(frozen=True)
class Frozen:
    tensor: object


class Custom:
    """Pickles a tuple of its own making, not its attributes."""

    def __init__(self, first, second):
        self._first, self._second = first, second

    def __getstate__(self):
        return (self._second, self._first)

    def __setstate__(self, state):
        self._second, self._first = state


def _tensors(count):
    return [engine.tensor([float(i)], requires_grad=True) for i in range(count)]


def _deep(value, depth):
    for _ in range(depth):
        value = [value]
    return value


def test_every_kind_of_holder_is_searched_in_the_order_its_copy_gives():
    t = _tensors(9)
    value = (collections.OrderedDict(b=t[0], a=Pair(t[1], [t[2]])), Slotted(t[3], 2.0),
             Holder(t[4], 1.0), Frozen(t[5]), Custom(t[6], t[7]), _deep(t[8], 100),
             engine.tensor([9.0]))  # not requiring grad: left out
    found = grad_tensors(value)
    assert {id(x) for x in found} == {id(x) for x in t}
    copy = grad_tensors(cloudpickle.loads(cloudpickle.dumps(value)))
    assert [x.data.tolist() for x in copy] == [x.data.tolist() for x in found]


def test_a_tensor_held_twice_is_found_once():
    (a,) = _tensors(1)
    assert grad_tensors([a, (a, {"again": a})]) == [a]


def test_a_cycle_ends():
    (a,) = _tensors(1)
    loop = [a]
    loop.append(loop)
    assert grad_tensors(loop) == [a]


def test_a_set_holding_a_tensor_that_requires_grad_is_refused():
    (a,) = _tensors(1)
    with pytest.raises(TypeError, match="inside a set"):
        grad_tensors([{a}])
    assert grad_tensors([{1, 2}, frozenset({engine.tensor([1.0])})]) == []
