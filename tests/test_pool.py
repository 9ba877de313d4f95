"""The ``--jobs`` worker pool records the workers it forks and stops exactly those (through the
public ``multiprocessing`` process handles): the API path, where no ``os._exit`` ends the process
and no parent death takes the workers with it."""

from __future__ import annotations

import multiprocessing
import sys
import time

import pytest

from grpofit.commands.pipeline import _new_pool, map_items, stop_pool
from grpofit.runtime.pool import WorkerPool

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="forks workers")


def _square(x, extra):
    return x * x + extra


def test_the_pool_records_its_workers_and_stop_pool_ends_them_mid_item():
    before = set(multiprocessing.active_children())
    pool = _new_pool(multiprocessing.get_context("fork"), 2)
    futures = [pool.submit(time.sleep, 30.0) for _ in range(2)]
    assert len(pool.workers) == 2 and not set(pool.workers) & before
    deadline = time.monotonic() + 20.0
    while not all(f.running() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop_pool(pool)
    deadline = time.monotonic() + 10.0  # a loaded machine may take a moment to reap a killed worker
    while any(p.is_alive() for p in pool.workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(p.is_alive() for p in pool.workers)  # a sleep of 30 s ended by the stop, not by itself
    assert time.monotonic() < deadline
    assert set(multiprocessing.active_children()) <= before  # nothing of the pool is left


def test_map_items_keeps_the_order_and_leaves_no_worker():
    before = set(multiprocessing.active_children())
    out = map_items(_square, list(range(20)), 1, jobs=2, lost=lambda item: None)
    assert out == [x * x + 1 for x in range(20)]
    assert set(multiprocessing.active_children()) <= before


def test_the_pool_reads_no_private_attribute_of_the_executor():
    import inspect

    for module in (WorkerPool.__module__, stop_pool.__module__):
        source = inspect.getsource(sys.modules[module])
        assert "._processes" not in source and "_executor_manager" not in source, module
