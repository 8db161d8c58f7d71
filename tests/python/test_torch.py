"""PyTorch interop through DLPack: torch.from_dlpack(strideweave tensor) and
strideweave.from_dlpack(torch tensor) share memory, keep exact values and
strides, for every dtype both have, and keep each other's memory alive."""
import gc

import numpy as np
import pytest
import torch

import strideweave as sw
from strideweave import carriers

TORCH_DTYPES = [(torch.float32, sw.float32), (torch.float64, sw.float64), (torch.float16, sw.float16),
                (torch.bfloat16, sw.bfloat16), (torch.int32, sw.int32), (torch.int64, sw.int64),
                (torch.uint8, sw.uint8), (torch.bool, sw.bool_)]


def torch_sample(dtype, shape=(3, 4)):
    values = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape) * 1.25 - 4
    if dtype is torch.bool:
        return values.remainder(2) > 0.5
    if dtype in (torch.uint8,):
        return (values + 8).to(dtype)
    return values.to(dtype)


TORCH_VIEWS = [lambda x: x, lambda x: x.t(), lambda x: x[:, 1::2], lambda x: x[1], lambda x: x.t()[::2]]


@pytest.mark.parametrize("dtypes", TORCH_DTYPES, ids=lambda d: str(d[0]))
@pytest.mark.parametrize("view", TORCH_VIEWS)
def test_torch_to_strideweave_shares_memory(dtypes, view):
    tdtype, swdtype = dtypes
    base = torch_sample(tdtype)
    x = view(base)
    t = sw.from_dlpack(x)
    assert t.dtype is swdtype and t.shape == tuple(x.shape)
    back = torch.from_dlpack(t)
    assert back.dtype == tdtype and torch.equal(back, x)
    assert back.data_ptr() == x.data_ptr()  # the same memory, no copy either way
    assert back.stride() == x.stride()
    for coord in [(0,) * x.dim(), tuple(n - 1 for n in x.shape)]:
        assert t[coord] == x[coord].item()
    # Writes are seen both ways.
    probe = tuple(n - 1 for n in x.shape)
    value = True if tdtype is torch.bool else 3
    x[probe] = value
    assert t[probe] == value
    t[(0,) * x.dim()] = 0
    assert x[(0,) * x.dim()].item() == 0


@pytest.mark.parametrize("dtypes", TORCH_DTYPES, ids=lambda d: str(d[0]))
def test_strideweave_to_torch_exact_values(dtypes):
    tdtype, swdtype = dtypes
    expected = torch_sample(tdtype, (2, 3, 4))
    # A tensor on a carrier of the library's own, dense first mode fastest, then views of it.
    values = expected.to(torch.float64).numpy().ravel(order="F").tolist()
    own = sw.Tensor(carriers.CPU.from_values(values, dtype=swdtype), 0, sw.Layout.dense(2, 3, 4))
    x = torch.from_dlpack(own)
    assert x.dtype == tdtype and torch.equal(x, expected)
    tp = torch.from_dlpack(own.permute(2, 0, 1))
    assert torch.equal(tp, expected.permute(2, 0, 1)) and not tp.is_contiguous()
    assert tp.data_ptr() == x.data_ptr()
    x[1, 2, 3] = 1
    assert own[1, 2, 3] == 1


def test_torch_results_of_ops_round_trip():
    a = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    b = torch.randn(7, 3, generator=torch.Generator().manual_seed(1))
    ours = sw.matmul(sw.from_dlpack(a), sw.from_dlpack(b))
    assert torch.allclose(torch.from_dlpack(ours), a @ b, rtol=1e-5, atol=1e-5)
    s = sw.add(sw.from_dlpack(a), sw.from_dlpack(a))
    assert torch.equal(torch.from_dlpack(s), a + a)
    r = sw.relu(sw.from_dlpack(a.t()))
    assert torch.equal(torch.from_dlpack(r), torch.relu(a.t()))


def test_torch_tensor_stays_alive_through_the_carrier():
    x = torch.arange(8, dtype=torch.float32) * 0.5
    t = sw.from_dlpack(x)
    del x
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(8, dtype=np.float32) * 0.5)


def test_torch_round_trips():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = sw.from_numpy(a)
    tt = torch.from_dlpack(t)
    assert tt.shape == (3, 4) and torch.equal(tt, torch.from_numpy(a))
    tt[0, 0] = 42.0  # shares memory
    assert t[0, 0] == 42.0 and a[0, 0] == 42.0
    back = sw.from_dlpack(torch.arange(6, dtype=torch.float64).reshape(2, 3).t())
    np.testing.assert_array_equal(back.numpy(), np.arange(6, dtype=np.float64).reshape(2, 3).T)
    bf = sw.from_dlpack(torch.tensor([1.0, 2.5], dtype=torch.bfloat16))
    assert bf.dtype is sw.bfloat16 and bf.numpy().tolist() == [1.0, 2.5]


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_torch_consumes_both_capsules_of_ours(max_version):
    t = sw.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    capsule = t.__dlpack__() if max_version is None else t.__dlpack__(max_version=max_version)
    x = torch.utils.dlpack.from_dlpack(capsule)
    assert torch.equal(x, torch.arange(12, dtype=torch.float32).reshape(3, 4))
    x[0, 1] = 9.0
    assert t[0, 1] == 9.0
    assert t.carrier._exports == 1
    with pytest.raises(sw.StrideWeaveRuntimeError):
        t.carrier.release()
    del x
    gc.collect()
    assert t.carrier._exports == 0  # torch ran the deleter, once
    t.carrier.release()


@pytest.mark.parametrize("versioned", [False, True])
def test_torch_capsules_import_in_place(versioned):
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3).t()
    capsule = x.__dlpack__(max_version=(1, 0)) if versioned else torch.utils.dlpack.to_dlpack(x)
    t = sw.from_dlpack(capsule)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    x[2, 1] = -1.0
    assert t[2, 1] == -1.0
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.from_dlpack(capsule)  # consumed


def test_torch_from_dlpack_of_copies():
    z = sw.from_numpy(np.arange(4, dtype=np.float32), carriers.Zstd)
    assert torch.equal(torch.from_dlpack(z), torch.arange(4, dtype=torch.float32))
    nested = sw.Tensor(carriers.CPU.from_values(range(6), dtype=sw.bfloat16), 0,
                       sw.Layout(sw.Shape([2, 2]), sw.Stride([1, 3])))
    assert torch.equal(torch.from_dlpack(nested), torch.tensor([0, 1, 3, 4], dtype=torch.bfloat16))

@pytest.mark.parametrize("tdtype, dtype", [(torch.bfloat16, sw.bfloat16), (torch.float16, sw.float16)])
def test_half_matmul_follows_torch_dtype(tdtype, dtype):
    """bf16 @ bf16 -> bf16 (and f16 -> f16) as in PyTorch, rounded once from
    float32 sums; out_dtype=float32 returns those sums."""
    g = torch.Generator().manual_seed(3)
    # Multiples of 1/16 below 4: exact in both half formats and in their f32 sums.
    a = (torch.randint(-64, 64, (17, 40), generator=g) / 16).to(tdtype)
    b = (torch.randint(-64, 64, (40, 9), generator=g) / 16).to(tdtype)
    exact = a.double() @ b.double()
    ours = sw.matmul(sw.from_dlpack(a), sw.from_dlpack(b))
    assert ours.dtype is dtype
    assert torch.equal(torch.from_dlpack(ours), exact.float().to(tdtype))
    assert torch.equal(torch.from_dlpack(ours), a @ b)
    wide = sw.matmul(sw.from_dlpack(a), sw.from_dlpack(b), out_dtype=sw.float32)
    assert wide.dtype is sw.float32
    assert torch.equal(torch.from_dlpack(wide), exact.float())
    with pytest.raises(TypeError):
        sw.matmul(sw.from_dlpack(a), sw.from_dlpack(b), out_dtype=sw.float64)
    with pytest.raises(TypeError):
        sw.matmul(sw.from_dlpack(a), sw.from_dlpack(b), out_dtype="float32")


def test_torch_views_import_over_the_memory_they_span():
    # The carrier covers the slots from the view's first element to its
    # last, no more: (2, 3) of a (4, 5) base at (1, 1) spans 8 slots.
    base = torch.arange(20.0).reshape(4, 5)
    t = sw.from_dlpack(base[1:3, 1:4])
    assert t.carrier.size() == 8 and str(t.layout) == "(2,3):(5,1)"
    np.testing.assert_array_equal(t.numpy(), [[6, 7, 8], [11, 12, 13]])
    # A mode of extent 1 steps nowhere: its stride is 0, whatever torch says.
    col = sw.from_dlpack(base[:, 2:3])
    assert col.carrier.size() == 16 and str(col.layout) == "(4,1):(5,0)"
