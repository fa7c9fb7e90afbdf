"""Admission control: bounded in flight, bounded FIFO wait, nothing leaks."""

from __future__ import annotations

import asyncio

import pytest

from hybridsearch.gateway.admission import Admission, Overloaded


async def hold(admission: Admission, release: asyncio.Event, order: list[int], tag: int, wait_s: float = 1.0):
    async with admission.slot(wait_s):
        order.append(tag)
        await release.wait()


async def test_admits_up_to_the_limit_then_queues_then_refuses():
    admission = Admission(max_in_flight=2, max_queue=1, max_wait_s=1.0)
    release, order = asyncio.Event(), []
    holders = [asyncio.create_task(hold(admission, release, order, i)) for i in range(3)]
    await asyncio.sleep(0.01)
    assert admission.in_flight == 2 and admission.queued == 1 and order == [0, 1]
    with pytest.raises(Overloaded) as err:
        async with admission.slot(1.0):
            pass
    assert err.value.reason == "queue_full"
    release.set()
    await asyncio.gather(*holders)
    assert order == [0, 1, 2]  # the queued one ran once a slot was handed over
    assert admission.in_flight == 0 and admission.queued == 0


async def test_waits_at_most_max_wait_and_never_past_the_deadline():
    admission = Admission(max_in_flight=1, max_queue=4, max_wait_s=0.05)
    release = asyncio.Event()
    holder = asyncio.create_task(hold(admission, release, [], 0))
    await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(Overloaded) as err:
        async with admission.slot(10.0):
            pass
    assert err.value.reason == "wait" and 0.04 <= loop.time() - started < 0.5
    started = loop.time()
    with pytest.raises(Overloaded):
        async with admission.slot(0.01):  # the request's own deadline is shorter than max_wait
            pass
    assert loop.time() - started < 0.04
    release.set()
    await holder
    assert admission.in_flight == 0 and admission.queued == 0
    assert admission.stats.rejected_wait == 2


async def test_fifo_order_and_a_cancelled_waiter_gives_its_turn_away():
    admission = Admission(max_in_flight=1, max_queue=8, max_wait_s=5.0)
    release, order = asyncio.Event(), []
    first = asyncio.create_task(hold(admission, release, order, 0))
    await asyncio.sleep(0.01)
    waiting = [asyncio.create_task(hold(admission, release, order, i)) for i in (1, 2, 3)]
    await asyncio.sleep(0.01)
    waiting[0].cancel()  # a client gone away while queued
    release.set()
    await asyncio.gather(first, *waiting, return_exceptions=True)
    assert order == [0, 2, 3]
    assert admission.in_flight == 0 and admission.queued == 0


async def test_a_failing_body_releases_its_slot():
    admission = Admission(max_in_flight=1, max_queue=0, max_wait_s=0.0)
    with pytest.raises(RuntimeError):
        async with admission.slot(1.0):
            raise RuntimeError("boom")
    async with admission.slot(1.0) as waited:
        assert waited < 0.01
    assert admission.in_flight == 0


def test_rejects_nonsense_limits():
    with pytest.raises(ValueError):
        Admission(max_in_flight=0, max_queue=1, max_wait_s=0.1)
