"""Tensors, the six ops, operators and autograd against NumPy references."""
import numpy as np
import pytest

import strideweave as sw
from conftest import exact

rng = np.random.default_rng(7)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_tensor_over_a_carrier():
    c = sw.carriers.CPU.from_values(range(6), dtype=sw.float32)
    t = sw.Tensor(c, 0, sw.Layout.dense(2, 3))
    assert t.carrier is c and t.offset == 0 and t.layout == sw.Layout.dense(2, 3)
    assert t.shape == (2, 3) and t.dtype is sw.float32 and t.ndim == 2 and t.numel() == 6
    assert t[1, 0] == 1.0 and t[0, 1] == 2.0
    v = t.version
    t[1, 2] = 10.0
    assert t[1, 2] == 10.0 and c[5] == 10.0 and t.version == v + 1
    offset = sw.Tensor(c, 2, sw.Layout((2,), (2,)))
    assert offset.numpy().tolist() == [2.0, 4.0]


def test_tensor_constructor_errors():
    c = sw.carriers.CPU(4)
    with pytest.raises(TypeError) as e:
        sw.Tensor(np.zeros(4), 0, sw.Layout.dense(4))
    exact(e, sw.StrideWeaveTypeError)
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.Tensor(c, 0.0, sw.Layout.dense(4))
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.Tensor(c, 0, (4,))
    with pytest.raises(IndexError) as e:
        sw.Tensor(c, 1, sw.Layout.dense(4))
    exact(e, sw.StrideWeaveIndexError)


@pytest.mark.parametrize("shape_a,shape_b", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,))])
def test_elementwise_ops_broadcast_like_numpy(shape_a, shape_b):
    a, b = arr(*shape_a), arr(*shape_b)
    ta, tb = sw.from_numpy(a), sw.from_numpy(b)
    np.testing.assert_allclose(sw.add(ta, tb).numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose((ta + tb).numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(sw.elementwise_mul(ta, tb).numpy(), a * b, rtol=1e-6)
    np.testing.assert_allclose(sw.mul(ta, tb).numpy(), a * b, rtol=1e-6)
    np.testing.assert_allclose((ta * tb).numpy(), a * b, rtol=1e-6)


def test_scalars_on_either_side():
    a = arr(3, 2)
    t = sw.from_numpy(a)
    np.testing.assert_allclose(sw.mul(t, 2.5).numpy(), a * 2.5, rtol=1e-6)
    np.testing.assert_allclose(sw.mul(2.5, t).numpy(), a * 2.5, rtol=1e-6)
    np.testing.assert_allclose((3 * t).numpy(), a * 3, rtol=1e-6)
    np.testing.assert_allclose((t + 1).numpy(), a + 1, rtol=1e-6)
    np.testing.assert_allclose((1 + t).numpy(), a + 1, rtol=1e-6)
    np.testing.assert_allclose((t - 1).numpy(), a - 1, rtol=1e-6)
    np.testing.assert_allclose((-t).numpy(), -a, rtol=1e-6)


def test_relu_reduce_sum_matmul():
    a = arr(2, 3, 4)
    t = sw.from_numpy(a)
    np.testing.assert_allclose(sw.relu(t).numpy(), np.maximum(a, 0))
    np.testing.assert_allclose(sw.reduce_sum(t).numpy(), a.sum(), rtol=1e-5)
    np.testing.assert_allclose(sw.reduce_sum(t, axes=1).numpy(), a.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(sw.reduce_sum(t, axes=(0, -1), keepdims=True).numpy(),
                               a.sum(axis=(0, 2), keepdims=True), rtol=1e-5)
    b = arr(4, 5)
    np.testing.assert_allclose(sw.matmul(t, sw.from_numpy(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((t @ sw.from_numpy(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    m = sw.from_numpy(arr(3, 4))
    np.testing.assert_allclose((m @ m.T).numpy(), m.numpy() @ m.numpy().T, rtol=1e-5, atol=1e-5)


def test_op_errors():
    a = sw.from_numpy(arr(2, 3))
    with pytest.raises(TypeError) as e:
        sw.add(a, sw.from_numpy(np.ones((2, 3), np.float64)))
    exact(e, sw.StrideWeaveTypeError)
    with pytest.raises(ValueError) as e:
        sw.add(a, sw.from_numpy(arr(4, 3)))
    exact(e, sw.StrideWeaveValueError)
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.relu(a.numpy().tolist())  # a NumPy array is taken (without a copy); a list is not
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.add(a, "1")
    with pytest.raises(sw.StrideWeaveValueError):
        sw.reduce_sum(a, axes=(0, 0))
    with pytest.raises(IndexError) as e:
        sw.reduce_sum(a, axes=5)
    exact(e, sw.StrideWeaveIndexError)
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.reduce_sum(a, axes=0.0)


def test_autograd_backward_grad_and_no_grad():
    x_np, w_np = arr(4, 3), arr(3, 2)
    x, w = sw.from_numpy(x_np), sw.from_numpy(w_np)
    w.requires_grad = True
    assert w.requires_grad and w.is_leaf and w.grad is None
    loss = sw.reduce_sum(sw.relu(x @ w) * 2.0)
    assert not loss.is_leaf
    loss.backward()
    mask = (x_np @ w_np) > 0
    np.testing.assert_allclose(w.grad.numpy(), x_np.T @ (2.0 * mask), rtol=1e-5, atol=1e-5)
    assert w.grad is w.grad  # the same wrapper while it lives
    w.grad = None
    assert w.grad is None
    with sw.no_grad():
        assert not sw.is_grad_enabled()
        y = sw.reduce_sum(x @ w)
    assert sw.is_grad_enabled()
    with pytest.raises(RuntimeError):
        y.backward()


def test_backward_with_cotangent_and_errors():
    x = sw.from_numpy(arr(2, 2)).requires_grad_()
    y = x * x
    with pytest.raises(sw.StrideWeaveValueError):
        y.backward()  # no cotangent for a 4-element tensor
    y.backward(sw.from_numpy(np.ones((2, 2), np.float32)), retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy(), rtol=1e-6)
    with pytest.raises(sw.StrideWeaveTypeError):
        y.backward(np.ones((2, 2)))
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.from_numpy(np.ones(2, np.int32)).requires_grad = True


def test_modified_in_place_is_runtime_error():
    x = sw.from_numpy(arr(3)).requires_grad_()
    y = x * x
    x[0] = 5.0
    with pytest.raises(RuntimeError) as e:
        sw.reduce_sum(y).backward()
    exact(e, sw.StrideWeaveRuntimeError)


def test_no_grad_as_decorator():
    @sw.no_grad()
    def f():
        return sw.is_grad_enabled()

    assert f() is False and sw.is_grad_enabled()


def test_move_async_moves_values_and_releases_source():
    src = sw.from_numpy(arr(3, 2))
    values = src.numpy().copy()
    dest = sw.carriers.Host(0)
    h = sw.move_async(src, dest)
    assert isinstance(h, sw.AwaitMove)
    moved = h.wait()
    assert moved is h.wait() and moved.carrier is dest
    assert src.carrier.is_released()
    np.testing.assert_array_equal(moved.numpy(), values)
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.move_async(values, dest)


def test_dtypes_and_elements():
    for dtype, value in ((sw.float64, 1.5), (sw.int32, -3), (sw.int64, 2**40), (sw.uint8, 200), (sw.bool_, True),
                         (sw.float16, 0.5), (sw.bfloat16, 2.0)):
        c = sw.carriers.CPU(2, dtype=dtype)
        c[1] = value
        assert c[1] == value and c.dtype is dtype
        t = sw.Tensor(c, 0, sw.Layout.dense(2))
        assert t[1] == value and type(t[1]) is type(value)
    with pytest.raises(sw.StrideWeaveValueError):
        sw.Tensor(sw.carriers.CPU(1, dtype=sw.int32), 0, sw.Layout.dense(1))[0] = 1.5
