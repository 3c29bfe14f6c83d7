"""The frame ring mirrored on the training device (``replay.device_frames``) gives the host ring's batches byte for
byte: every slot at every step (episode starts' zero padding, episodes cut short, the ring's wrap-around), n-step
look-aheads, a checkpoint load, and a real Pong run, whose learning is unchanged. Run with ``device: cpu``
everywhere (the same code as on a GPU: a torch tensor of frames, gathered by ``index_select``) and on CUDA where
there is a GPU (docs/results/pong/gpu.sh runs this file there)."""

from __future__ import annotations

import csv
import inspect

import numpy as np
import pytest
import torch

from per_cli.config import load_config
from per_cli.config.shipped import shipped_root
from per_cli.errors import ConfigError
from per_cli.replay import gather, make_replay
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.gather import SKIPPED
from per_cli.replay.storage.frames import FrameStackStorage, gather_frames_members
from per_cli.train.loop.trainer import build_member, run_member
from per_cli.train.loop.updates import reads_host_states, updates_for
from tests.replay.test_frames import SIZE, fill

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def assert_device_equals_host(storage: FrameStackStorage, slots: np.ndarray) -> None:
    obs, next_obs = storage.stacks(slots)
    stacks = storage.device_stacks(slots)
    assert stacks.obs.dtype == torch.uint8
    assert stacks.obs.device.type == storage.mirror.device.type
    np.testing.assert_array_equal(stacks.obs.cpu().numpy(), obs)
    np.testing.assert_array_equal(stacks.next_obs.cpu().numpy(), next_obs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stack", [1, 2, 4])
@pytest.mark.parametrize(("capacity", "extra"), [(40, None), (7, 5)])
def test_every_sampleable_slot_is_the_hosts_at_every_step(stack, capacity, extra, device):
    storage = FrameStackStorage(capacity, (stack, SIZE, SIZE), extra_frames=extra, check_memory=False)
    storage.mirror_to(device)
    padded = []

    def after(i, given):
        slots = np.arange(storage.size)
        slots = slots[storage.sampleable(slots)]
        if slots.size:
            assert_device_equals_host(storage, slots)
            padded.append(storage._positions(slots)[1] is not None)

    fill(storage, 300, stack=stack, on_step=after)
    assert storage.added == 300 and storage.size == capacity  # wrapped around
    assert np.array_equal(storage.mirror.frames.cpu().numpy(), storage.frames)
    assert any(padded) == (stack > 1)  # episode starts' padding was gathered and zeroed on the device too


@pytest.mark.parametrize("device", DEVICES)
def test_a_mirror_made_late_and_a_loaded_checkpoint_hold_the_hosts_frames(device):
    source = FrameStackStorage(30, (4, SIZE, SIZE), check_memory=False)
    fill(source, 100, max_len=9, seed=4)
    source.mirror_to(device)  # made after the frames were written: copies them
    assert_device_equals_host(source, np.arange(source.size)[source.sampleable(np.arange(source.size))])
    fill(source, 37, max_len=9, seed=5)
    target = FrameStackStorage(30, (4, SIZE, SIZE), check_memory=False)
    target.mirror_to(device)
    target.load_state_dict(source.state_dict())
    slots = np.arange(target.size)[target.sampleable(np.arange(target.size))]
    assert_device_equals_host(target, slots)
    assert torch.equal(target.device_stacks(slots).obs, source.device_stacks(slots).obs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["uniform", "prioritized"])
def test_sampled_batches_carry_the_same_stacks_on_the_device(kind, device):
    cfg = load_config(None, [f"replay.kind={kind}", "replay.capacity=64", "replay.n_step=3", "env.id=pong"])
    memory = make_replay(cfg, (4, SIZE, SIZE), np.uint8, seed=3, frame_stack=4)
    assert isinstance(memory.storage, FrameStackStorage)
    memory.storage.mirror_to(device)
    fill(memory, 200, max_len=7, seed=2)
    for _ in range(20):
        batch = memory.sample(16)
        assert batch.device_stacks is not None
        np.testing.assert_array_equal(batch.device_stacks.obs.cpu().numpy(), batch.obs)
        np.testing.assert_array_equal(batch.device_stacks.next_obs.cpu().numpy(), batch.next_obs)  # n-step look-ahead's


def test_a_memory_without_a_mirror_gathers_nothing_on_a_device():
    storage = FrameStackStorage(16, (4, SIZE, SIZE), check_memory=False)
    fill(storage, 20)
    with pytest.raises(RuntimeError, match="mirror_to"):
        storage.device_stacks(np.arange(4))


def test_device_frames_need_atari_frame_stacks():
    cfg = load_config(None, ["env.id=CartPole-v1", "replay.device_frames=true"], device="cpu")
    with pytest.raises(ConfigError, match=r"replay.device_frames: true needs Atari frame stacks"):
        build_member(cfg)


def count_host_stacks(monkeypatch) -> list[int]:
    """The frames per sample of every compiled frame gather from now on (``o_frames``' width; 0: no host stacks
    built), in call order."""
    kernel = gather_frames_members  # (the compiled one: a second call wraps it, not the wrapper)
    signature = inspect.signature(kernel.py_func)
    calls: list[int] = []

    def counted(*args):
        calls.append(signature.bind(*args).arguments["o_frames"].shape[2])
        return kernel(*args)

    monkeypatch.setattr(gather, "gather_frames_members", counted)
    return calls


def metrics_rows(run_dir) -> list[dict]:
    """metrics.csv's rows but their wall time."""
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k != "wall_time"} for row in csv.DictReader(f)]


def test_a_pong_run_learns_the_same_from_device_frames(tmp_path, monkeypatch):
    """A few real Pong updates (prioritized, n-step off) with the frames gathered from the mirror equal those from
    the host's batches: the same parameters, bit for bit, and the same metrics.csv; with no measure of the states
    (metrics.iid false; correlation false in this config) the host stacks are never built (the loop's gather skips
    them: updates.reads_host_states)."""
    pytest.importorskip("ale_py")
    params, built, rows = {}, {}, {}
    for on in (False, True):
        cfg = load_config(
            shipped_root() / "pong_fast_per.yaml",
            [f"replay.device_frames={str(on).lower()}", "train.total_steps=90", "train.learning_starts=60",
             "replay.capacity=200", "replay.batch_size=8", "train.eval_episodes=0", "train.checkpoint_every=0",
             "metrics.iid=false", "log.tensorboard=false", "log.every=10", "env.max_episode_steps=30"],
            device="cpu", seed=2,
        )  # fmt: skip
        member = build_member(cfg)
        assert (member.memory.storage.mirror is not None) == on
        built[on] = count_host_stacks(monkeypatch)
        summary = run_member(member, tmp_path / str(on))
        assert summary["updates"] == 31
        params[on] = {k: v.clone() for k, v in member.agent.q_net.state_dict().items()}
        rows[on] = metrics_rows(tmp_path / str(on))
    for name, value in params[True].items():
        assert torch.equal(value, params[False][name]), name
    assert len(rows[True]) == 3 and rows[True] == rows[False]
    assert len(built[False]) >= 31 and set(built[False]) == {5}  # (the host's batches: each update's stacks built)
    assert len(built[True]) >= 31 and set(built[True]) == {0}


@pytest.mark.parametrize(
    ("sets", "skipped"),
    [([], True), (["metrics.iid=true"], False), (["metrics.correlation=true"], False),
     (["replay.device_frames=false"], False)],
)  # fmt: skip
def test_the_host_states_are_skipped_only_where_nothing_reads_them(sets, skipped):
    """The loop's rule, chosen when its gather is built: skipped with the frames on the device and no measure of
    the states; gathered for the i.i.d. measures, the correlation count, or without the mirror."""
    pytest.importorskip("ale_py")
    cfg = load_config(shipped_root() / "pong_fast_per.yaml", ["metrics.iid=false", *sets], device="cpu", seed=2)
    member = build_member(cfg)
    assert reads_host_states([member], updates_for([member])) is not skipped


def test_a_gather_without_host_states_skips_them_and_refuses_to_be_read(monkeypatch):
    """``host_states=False``: the same draws' batches (one member, and two: the gather's two routes), with their
    device stacks and every other field equal to the host-gathering memories', and obs/next_obs SKIPPED, which
    raise where read as arrays; plain rings refuse it."""

    def memories(seeds):
        out = []
        for seed in seeds:
            cfg = load_config(None, ["replay.kind=prioritized", "replay.capacity=64", "replay.n_step=3", "env.id=pong"])
            memory = make_replay(cfg, (4, SIZE, SIZE), np.uint8, seed=seed, frame_stack=4)
            memory.storage.mirror_to("cpu")
            fill(memory, 200, max_len=7, seed=seed)
            out.append(memory)
        return out

    for seeds in ([3], [3, 4]):
        host, device = CohortSampling(memories(seeds)), CohortSampling(memories(seeds), host_states=False)
        calls = count_host_stacks(monkeypatch)
        which, betas = list(range(len(seeds))), [0.5] * len(seeds)
        for _ in range(5):
            drawn = host.sample(which, 16, betas), device.sample(which, 16, betas)
            assert calls[-2:] == [8, 0]  # (n-step 3: obs and the look-ahead's next_obs, 4 frames each; none)
            for a, b in zip(*drawn, strict=True):
                assert b.obs is SKIPPED and b.next_obs is SKIPPED
                for name in ("actions", "rewards", "terminated", "indices", "weights", "ages", "episodes"):
                    np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
                np.testing.assert_array_equal(b.device_stacks.obs.numpy(), a.obs)
                np.testing.assert_array_equal(b.device_stacks.next_obs.numpy(), a.next_obs)  # (n-step look-ahead's)
    for read in (np.asarray, torch.as_tensor, len):
        with pytest.raises(RuntimeError, match="host obs/next_obs were not gathered"):
            read(b.obs)
    plain = make_replay(load_config(None, ["replay.capacity=64"]), (3,), np.float32, seed=1)
    with pytest.raises(ValueError, match="without the host states"):
        CohortSampling([plain], host_states=False)
