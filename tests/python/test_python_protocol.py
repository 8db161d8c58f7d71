"""Python-level argument rules of the facades: no SWIG internals in errors,
bool-only requires_grad, and pickling refused with a clear TypeError."""
import pickle

import numpy as np
import pytest
import strideweave as sw


@pytest.mark.parametrize("kwargs,kind", [({"compute_threads": -1}, ValueError), ({"worker_threads": -2}, ValueError),
                                         ({"compute_threads": 2 ** 70}, ValueError),
                                         ({"compute_threads": 1.5}, TypeError), ({"compute_threads": "2"}, TypeError),
                                         ({"compute_threads": True}, TypeError)])
def test_runtime_thread_counts(kwargs, kind):
    # These were an OverflowError "in method 'runtime_create'" (a SWIG name) or int("2") accepted.
    with pytest.raises(kind) as info:
        sw.Runtime(**kwargs)
    assert "runtime_create" not in str(info.value) and "threads" in str(info.value)


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0])
def test_requires_grad_takes_only_bool(value):
    t = sw.ones(2)
    with pytest.raises(TypeError, match="requires_grad must be a bool"):
        t.requires_grad = value
    assert t.requires_grad is False
    t.requires_grad = np.bool_(True)
    assert t.requires_grad is True


def test_pickling_handles_is_a_clear_type_error(runtime):
    t = sw.ones(2)
    objects = [t, t.carrier, runtime, sw.carriers.Host(4), sw.move_async(t, sw.carriers.Host(2))]
    for obj in objects:
        with pytest.raises(TypeError, match="cannot be pickled") as info:
            pickle.dumps(obj)
        assert "Swig" not in str(info.value)
    objects[-1].wait()
    assert pickle.loads(pickle.dumps(sw.float32)) is sw.float32


@pytest.mark.parametrize("call", [
    lambda: sw.carriers.CPU(2 ** 70), lambda: sw.carriers.Zstd(4, level=2 ** 40), lambda: sw.LRUPolicy(2 ** 70),
    lambda: sw.Tensor(sw.carriers.CPU(4), 2 ** 70, sw.Layout.dense(2)), lambda: sw.ones(2, 3).unsqueeze(2 ** 70),
    lambda: sw.topk(sw.ones(2, 3), 2 ** 70)])
def test_out_of_range_integers_are_value_errors_without_swig_names(call):
    # Each was an OverflowError "in method 'sw_...', argument N of type '...'".
    with pytest.raises(ValueError, match="out of range") as info:
        call()
    assert "in method" not in str(info.value) and not isinstance(info.value, OverflowError)


def test_huge_slice_bounds_clamp_and_huge_indices_are_index_errors():
    t = sw.arange(5)
    assert t[2 ** 70:].shape == (0,) and t[-2 ** 70:2 ** 70].numpy().tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(IndexError):
        sw.ones(2, 3)[:, 2 ** 70]
