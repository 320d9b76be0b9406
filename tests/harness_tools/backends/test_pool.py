"""The backend pool (harness_tools.backends.pool) over real cpu workers: leases, exclusivity, lost members."""

from __future__ import annotations

import threading

import pytest

from harness_tools.backends import create_backend
from harness_tools.backends.contract import DeviceInfo
from harness_tools.backends.pool import BackendPool
from harness_tools.errors import BackendUnavailable
from harness_tools.run import cancellation


@pytest.fixture(scope="module")
def pool():
    p = BackendPool(lambda pin: create_backend("cpu"), [None, None])
    yield p
    p.close()


def test_members_start_with_their_slot_on_the_device_record_and_separate_workers(pool):
    assert pool.size == 2 and [m.slot for m in pool.members] == [0, 1]
    assert [m.info.pool_slot for m in pool.members] == [0, 1]
    pids = {m.backend.worker_pid for m in pool.members}
    assert len(pids) == 2 and None not in pids
    assert pool.device_info().backend == "cpu"


def test_two_leases_get_different_workers_and_a_third_waits_for_one_to_be_released(pool):
    got: list[int] = []
    waits: list[str] = []
    third_has_one = threading.Event()
    with pool.lease(on_wait=lambda: waits.append("first")) as a, pool.lease(on_wait=lambda: waits.append("second")) as b:
        assert a.slot != b.slot and waits == []  # a free worker each: nobody waited

        def third():
            with pool.lease(on_wait=lambda: waits.append("third")) as c:
                got.append(c.slot)
                third_has_one.set()

        waiter = threading.Thread(target=third)
        waiter.start()
        assert not third_has_one.wait(0.5)  # both busy: it waits
        released = b.slot
    assert third_has_one.wait(10)
    waiter.join(10)
    assert got and got[0] in (a.slot, released)
    assert waits == ["third"]  # told once, before it waited


def test_an_exclusive_hold_waits_for_every_lease_and_keeps_new_ones_out(pool):
    order: list[str] = []
    exclusive_held, release_exclusive = threading.Event(), threading.Event()

    def exclusive():
        with pool.exclusive():
            order.append("exclusive")
            exclusive_held.set()
            release_exclusive.wait(10)

    with pool.lease():
        holder = threading.Thread(target=exclusive)
        holder.start()
        assert not exclusive_held.wait(0.5)  # a lease is out: the exclusive hold waits
        order.append("lease released")
    assert exclusive_held.wait(10)
    leased = threading.Event()

    def later_lease():
        with pool.lease():
            order.append("later lease")
            leased.set()

    latecomer = threading.Thread(target=later_lease)
    latecomer.start()
    assert not leased.wait(0.5)  # the pool is held exclusively, though a worker is free
    release_exclusive.set()
    assert leased.wait(10)
    holder.join(10)
    latecomer.join(10)
    assert order == ["lease released", "exclusive", "later lease"]


def test_a_waiting_lease_gives_up_when_its_work_is_cancelled(pool):
    token = cancellation.CancelToken()
    outcome: list[str] = []

    def waiter():
        with cancellation.cancellable(token):
            try:
                with pool.lease():
                    outcome.append("leased")
            except cancellation.Cancelled:
                outcome.append("cancelled")

    with pool.lease(), pool.lease():
        thread = threading.Thread(target=waiter)
        thread.start()
        token.cancel("the client went away")
        thread.join(10)
    assert outcome == ["cancelled"]


def test_a_lost_member_is_avoided_and_when_none_is_left_the_error_says_why():
    pool = BackendPool(lambda pin: create_backend("cpu"), [None, None])
    try:
        first = pool.members[0]
        pool.mark_lost(first, "its GPU fell off the bus")
        assert pool.size == 1 and first.backend.worker_pid is None
        for _ in range(3):
            with pool.lease() as member:
                assert member.slot == 1
        with pool.lease(avoid=frozenset({1})) as member:  # nothing else lives: the avoided one is still used
            assert member.slot == 1
        pool.mark_lost(pool.members[1], "the node went away")
        with pytest.raises(BackendUnavailable, match="fell off the bus.*the node went away"):
            with pool.lease():
                pass
        with pytest.raises(BackendUnavailable, match="every worker"):
            pool.device_info()
    finally:
        pool.close()


class _Fake:
    """An ExecutionBackend of a named device that runs nothing: the pool only reads its info here."""

    name = "fake"
    traits = None

    def __init__(self, device: str):
        self.info = DeviceInfo(backend="fake", name=device, arch="sm_90")
        self.closed = False

    def device_info(self) -> DeviceInfo:
        return self.info

    def run_case(self, request, timeout_s):
        raise AssertionError("not used")

    def close(self) -> None:
        self.closed = True


def test_only_members_of_the_first_device_model_are_kept_and_a_member_that_cannot_start_is_left_out():
    made: dict[str, _Fake] = {}

    def factory(pin):
        if pin == "2":
            raise BackendUnavailable("cuInit failed on GPU 2")
        made[pin] = _Fake("NVIDIA H200" if pin != "1" else "NVIDIA A100")
        return made[pin]

    pool = BackendPool(factory, ["0", "1", "2", "3"])
    assert [m.pin for m in pool.members] == ["0", "3"] and pool.device_info().name == "NVIDIA H200"
    assert made["1"].closed and not made["0"].closed


def test_a_pool_none_of_whose_members_starts_says_why_for_each():
    def factory(pin):
        raise BackendUnavailable(f"no GPU {pin}")

    with pytest.raises(BackendUnavailable, match="no GPU 0.*no GPU 1"):
        BackendPool(factory, ["0", "1"])
