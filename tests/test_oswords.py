"""The OS CSPRNG's words for compiled loops (sketchsyn.kernels.oswords): uniform, each read
once, a buffer per thread, none of a parent's words in a forked child."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from scipy import stats

from sketchsyn import kernels
from sketchsyn.counters import InhomogeneousSparseBank
from sketchsyn.kernels import oswords


@pytest.fixture
def words():
    if not kernels.enabled():
        pytest.skip(kernels.why())
    src = oswords.word_source()
    if src is None:
        pytest.skip("no OS CSPRNG the compiled loops can call")
    return src


def test_words_are_uniform_bytes_and_bits(words):
    """2**16 words of each function: their bytes are uniform (chi-square over 256 values) and
    every bit is fair (binomial, each position); a constant or a biased source fails."""
    w32 = words.draw(1 << 16)
    w64 = words.draw64(1 << 16)
    for w, nbits in ((w32, 32), (w64, 64)):
        counts = np.bincount(w.view(np.uint8), minlength=256)
        assert stats.chisquare(counts).pvalue > 1e-6
        bits = (w[:, None] >> np.arange(nbits, dtype=w.dtype)) & w.dtype.type(1)
        ones = bits.sum(axis=0)
        p = (
            stats.binomtest(int(ones.min()), w.size).pvalue,
            stats.binomtest(int(ones.max()), w.size).pvalue,
        )
        assert min(p) > 1e-6 / nbits, ones


def test_each_word_is_read_once_across_refills(words):
    """Three buffers' worth of 64-bit words, refills included, hold no repeat (a repeat among
    6,000 uniform 64-bit words has probability about 1e-12)."""
    before = oswords.words_taken()
    got = words.draw64(3 * oswords.WORDS // 2 + 7).tolist()
    assert len(set(got)) == len(got)
    taken = oswords.words_taken() - before
    assert 2 * len(got) <= taken <= 2 * len(got) + 4  # (a 64-bit call may skip a buffer's last)


def test_threads_have_buffers_of_their_own(words):
    """Another thread's state is another buffer (the loops run without the GIL)."""
    other = []
    t = threading.Thread(target=lambda: other.append(oswords.word_source()))
    t.start()
    t.join()
    assert other[0] is not None and other[0] is not words
    assert oswords.word_source() is words  # the same thread: the same buffer


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_does_not_read_its_parents_words(words):
    """After a fork, the parent and the child each read their next word: a child that went on
    with the parent's buffer would read the very word the parent reads."""
    words.draw64(1)  # the buffer is filled and partly read
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.write(write, int(oswords.word_source().draw64(1)[0]).to_bytes(8, "little"))
        finally:
            os._exit(0)
    os.close(write)
    child = int.from_bytes(os.read(read, 8), "little")
    os.close(read)
    os.waitpid(pid, 0)
    assert child != int(words.draw64(1)[0])


def test_a_buffer_is_not_copied(words):
    """A buffer's words are read once: pickling (or copying) one is refused."""
    import copy
    import pickle

    with pytest.raises(TypeError, match="read once"):
        pickle.dumps(words)
    with pytest.raises(TypeError, match="read once"):
        copy.copy(words)


def test_private_banks_on_two_threads_each_read_their_own_buffer(words):
    """Two threads feed a private bank each at once (the compiled loop runs without the
    GIL): each thread's loop takes words from its own buffer, and both banks end in a sane
    state (every counter's count of closed segments and its open count non-negative)."""
    taken, errors = {}, []

    def feed(name):
        try:
            bank = InhomogeneousSparseBank(64, 4.0, lambda r: 3.0)
            rng = np.random.default_rng(len(name))
            for t in range(0, 4000, 200):
                times = np.sort(rng.integers(t + 1, t + 201, 300))
                bank.update_events(t + 200, rng.integers(0, 64, 300), times)
            assert (bank._segs >= 0).all() and (bank._n >= 0).all()
            assert bank._segs.max() > 0
            taken[name] = oswords.words_taken()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=feed, args=(n,)) for n in ("a", "bb")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert taken["a"] > 0 and taken["bb"] > 0
