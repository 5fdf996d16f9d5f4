"""One kernel called from several Python threads at once: each call's own result, and the GIL
released while a kernel runs."""
import sys
import threading

import numpy

import attnc
from conftest import random_qkv


def test_threads_calling_one_kernel_get_their_own_results():
    kernel = attnc.compile("heads=4 kv_heads=2 d_k=16 mask=causal")
    inputs = [random_qkv(numpy.random.default_rng(seed), 1, 4, 2, 33, 33, 16)
              for seed in range(8)]
    expected = [kernel(*qkv, threads=1) for qkv in inputs]
    results = [None] * len(inputs)

    def call(index):
        for _ in range(5):
            results[index] = kernel(*inputs[index], threads=1)

    workers = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for result, want in zip(results, expected):
        numpy.testing.assert_array_equal(result, want)


def test_python_runs_while_a_kernel_runs():
    """The main thread counts while the worker is inside one long kernel call. With a switch
    interval longer than the call, a GIL held through it would let the main thread count
    nothing until the call ended."""
    kernel = attnc.compile("heads=8 d_k=64")
    q, k, v = random_qkv(numpy.random.default_rng(0), 1, 8, 8, 1024, 1024, 64)
    state = {"inside": False, "done": False}

    def call():
        state["inside"] = True
        kernel(q, k, v, threads=1)
        state["done"] = True

    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    try:
        worker = threading.Thread(target=call)
        counted = 0
        worker.start()
        while not state["done"]:
            counted += state["inside"]
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert counted > 10000
