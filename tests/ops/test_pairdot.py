"""ops.pairdot: one fixed float32 order for every pair's dot, the same bits in numpy, in torch on
the CPU and on CUDA, whatever the block, the thread or the other pairs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core import backend
from pipeline.ops import pairdot
from tests.helpers.reference import fold_dot


def _pairs(seed: int, nq: int, nb: int, d: int, n: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    # a wide range of magnitudes, so different summation orders really round differently
    xq = (rng.normal(size=(nq, d)) * 10.0 ** rng.integers(-3, 4, size=(nq, d)) * scale).astype(
        np.float32
    )
    xb = rng.normal(size=(nb, d)).astype(np.float32)
    return xq, xb, rng.integers(0, nq, n), rng.integers(0, nb, n)


def test_fold_by_hand():
    """Cancellation that the order decides: 1e8 + 1 rounds to 1e8 in float32."""
    ones = np.ones((1, 4), np.float32)
    four = np.array([[1e8, 1.0, -1e8, 1.0]], np.float32)  # (1e8 + -1e8) + (1 + 1) = 2
    assert pairdot.pair_dots(four, ones, [0], [0])[0] == np.float32(2.0)
    assert np.float32(np.float32(np.float32(1e8) + 1) - np.float32(1e8)) + 1 == 1.0  # left to right
    three = np.array([[1e8, 1.0, -1e8]], np.float32)  # odd: (1e8 + -1e8), then + 1 = 1
    assert pairdot.pair_dots(three, ones[:, :3], [0], [0])[0] == np.float32(1.0)
    five = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)  # ((1+5) + 3) + (2 + 4) = 15
    assert pairdot.pair_dots(five, np.ones((1, 5), np.float32), [0], [0])[0] == 15.0


def test_empty_inputs():
    assert pairdot.pair_dots(np.zeros((2, 3), np.float32), np.zeros((2, 3)), [], []).shape == (0,)
    z = pairdot.pair_dots(
        np.zeros((2, 0), np.float32), np.zeros((2, 0), np.float32), [0, 1], [1, 0]
    )
    assert z.dtype == np.float32 and z.tolist() == [0.0, 0.0]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    d=st.sampled_from([1, 2, 3, 5, 7, 16, 31, 64, 384]),
    n=st.integers(1, 300),
    block=st.sampled_from([None, 1, 7, 64]),
)
def test_pair_dots_are_the_per_element_reference(seed, d, n, block):
    """numpy (threads over blocks) and torch on the CPU both give each pair the bits of the
    per-element reference, whatever block it fell in."""
    import torch

    xq, xb, qi, di = _pairs(seed, 9, 40, d, n)
    ref = np.array([fold_dot(xq[q], xb[b]) for q, b in zip(qi, di)], np.float32)
    host = pairdot.pair_dots(xq, xb, qi, di, block=block)
    dev = pairdot.pair_dots(xq, torch.from_numpy(xb), qi, di, block=block)
    assert host.dtype == dev.dtype == np.float32
    np.testing.assert_array_equal(host, ref)
    np.testing.assert_array_equal(dev, ref)
    np.testing.assert_allclose(
        host, (xq[qi].astype(np.float64) * xb[di]).sum(1), rtol=1e-4, atol=1e-3
    )


def test_blocks_cross_the_default_sizes():
    """More pairs than one host block (2 048) and than a small device block: the same bits as
    one pair at a time."""
    import torch

    xq, xb, qi, di = _pairs(3, 50, 300, 384, pairdot.HOST_BLOCK * 2 + 17)
    host = pairdot.pair_dots(xq, xb, qi, di)
    dev = pairdot.pair_dots(xq, torch.from_numpy(xb), qi, di, block=1000)
    some = np.random.default_rng(0).choice(len(qi), 50, replace=False)
    np.testing.assert_array_equal(host[some], [fold_dot(xq[qi[j]], xb[di[j]]) for j in some])
    np.testing.assert_array_equal(host, dev)


def test_float64_and_memmap_inputs_are_summed_as_float32(tmp_path):
    xq, xb, qi, di = _pairs(5, 6, 20, 33, 100)
    mm = np.lib.format.open_memmap(tmp_path / "xb.npy", "w+", np.float32, xb.shape)
    mm[:] = xb
    want = pairdot.pair_dots(xq, xb, qi, di)
    np.testing.assert_array_equal(pairdot.pair_dots(xq.astype(np.float64), mm, qi, di), want)


@pytest.mark.gpu
@pytest.mark.skipif(not backend.has_cuda(), reason="no CUDA GPU here (torch sees none)")
def test_cuda_gives_the_host_bits():
    import torch

    xq, xb, qi, di = _pairs(7, 500, 5000, 384, 200_000)
    host = pairdot.pair_dots(xq, xb, qi, di)
    tb = torch.from_numpy(xb).cuda()
    assert pairdot.default_block(tb) == pairdot.DEVICE_BLOCK < len(qi)  # several device blocks
    gpu = pairdot.pair_dots(torch.from_numpy(xq).cuda(), tb, qi, di)
    np.testing.assert_array_equal(gpu, host)


def test_default_block_follows_the_device():
    """Large launches only on an accelerator; numpy and torch on the CPU take the host block."""
    import torch

    xb = np.zeros((3, 4), np.float32)
    assert pairdot.default_block(xb) == pairdot.HOST_BLOCK
    assert pairdot.default_block(torch.from_numpy(xb)) == pairdot.HOST_BLOCK
