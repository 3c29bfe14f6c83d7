"""A PureJaxRL-style anchor: the seed001 CartPole protocol as ONE jitted, vmapped JAX program over S seeds.

Why: per's cohorts (docs/cohorts.md) are compared with per's own solo runs; this places them against the fastest
way one knows to run many small DQNs on a CPU, where the env, acting, the replay ring, sampling, the update and
the target sync of all S seeds are one XLA computation, no Python per step (PureJaxRL, Lu et al. 2022, with
gymnax's envs). The ratio per / JAX says how far per's Python loop around compiled kernels is from that.

The contract: both sides train configs/seed001/cartpole_uniform.yaml for ``--steps`` env steps per seed, no
evaluation, and are timed the same way in this one process (wall and ``time.process_time``, µs per seed-step):

* per: ``benchmarks/cohort_throughput.run`` - a ``Cohort`` of S seeds with the numba engine, as ``per train
  --seeds 1-S`` runs it (its loop, replay, update measures, TensorBoard and CSV logging, run directories),
  after a warm-up cohort that loads numba's kernels.
* JAX: gymnax's CartPole-v1 with ``max_steps_in_episode=200`` (CartPole-v0's limit; gymnax 1.x reports
  termination and truncation apart and returns the pre-reset observation, so a truncation bootstraps from the
  true next state and only termination stops the bootstrap); a 4-128-2 ReLU MLP with torch's default init;
  optax.adam(1e-3); MSE loss, no clipping, no double DQN; γ 0.8; batch 64 from a per-seed ring of 10^4
  transitions (arrays shaped (S, 10^4, ...)), drawn uniformly WITH replacement (per draws without replacement
  within a batch; at 10^4 transitions a repeat is rare, and drawing without replacement would cost a
  permutation per step); ε = max(1 - 0.95 t / 950, 0.05) at step t; one update per step once t + 1 >= 64
  (computed every step and kept by ``jnp.where``, as vmap makes any branch a select); the target copied
  (``jnp.where`` over the parameter tree) after the update of every step that ends an episode. The step is
  ``jax.lax.scan``-ned over ``--chunk`` steps, vmapped over seeds and jitted; the chunk is compiled ahead of time
  (its compile time printed apart), run once as a warm-up, then the measured run does ``--steps`` steps from the
  same initial state, ``block_until_ready`` at the end.

``--learn``: the anchor alone for 20,000 steps on 16 seeds; it prints the mean over seeds of each seed's last 20
episode returns, to show the anchor learns CartPole (per's seed001 uniform: IQM ~173 after 300 episodes).

    python benchmarks/jax_anchor.py [--steps 2000] [--seeds 100] [--chunk 500] [--no-per]
    python benchmarks/jax_anchor.py --learn [--steps 20000] [--seeds 16]

Needs the ``bench`` extra (jax, gymnax >= 1.0, optax).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import math
import sys
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))

HIDDEN, N_ACTIONS, OBS = 128, 2, 4
GAMMA, LR, BATCH, CAPACITY = 0.8, 1e-3, 64, 10_000
EPS_START, EPS_END, EPS_STEPS, LEARN_FROM, TIME_LIMIT = 1.0, 0.05, 950, 64, 200
LAST = 20  # episodes in the learning check's mean

OPTIMIZER = optax.adam(LR)  # torch.optim.Adam's defaults: β (0.9, 0.999), ε 1e-8


class Seed(NamedTuple):
    """One seed's whole training state; vmap stacks S of them (every leaf gains a leading S axis)."""

    key: jax.Array
    params: dict
    target: dict
    opt: optax.OptState
    env: object  # gymnax's EnvState
    obs: jax.Array
    t: jax.Array  # env steps so far
    buf: dict  # the ring: obs, action, reward, next_obs, terminated, each (CAPACITY, ...)
    size: jax.Array  # transitions in the ring
    ep_return: jax.Array
    returns: jax.Array  # the last LAST finished episodes' returns, a ring too
    episodes: jax.Array


def make_env():
    import gymnax

    env, params = gymnax.make("CartPole-v1")
    return env, params.replace(max_steps_in_episode=TIME_LIMIT)


def init_params(key: jax.Array) -> dict:
    """torch.nn.Linear's default init: weights and biases U(±1/sqrt(fan_in)), as per's network gets."""
    params = {}
    for i, (n_in, n_out) in enumerate([(OBS, HIDDEN), (HIDDEN, N_ACTIONS)]):
        key, kw, kb = jax.random.split(key, 3)
        bound = 1.0 / math.sqrt(n_in)
        params[f"w{i}"] = jax.random.uniform(kw, (n_in, n_out), minval=-bound, maxval=bound)
        params[f"b{i}"] = jax.random.uniform(kb, (n_out,), minval=-bound, maxval=bound)
    return params


def q_values(params: dict, obs: jax.Array) -> jax.Array:
    return jax.nn.relu(obs @ params["w0"] + params["b0"]) @ params["w1"] + params["b1"]


def init_seed(key: jax.Array, env, env_params) -> Seed:
    key, k_net, k_env = jax.random.split(key, 3)
    params = init_params(k_net)
    obs, env_state = env.reset(k_env, env_params)
    buf = {
        "obs": jnp.zeros((CAPACITY, OBS)),
        "action": jnp.zeros((CAPACITY,), jnp.int32),
        "reward": jnp.zeros((CAPACITY,)),
        "next_obs": jnp.zeros((CAPACITY, OBS)),
        "terminated": jnp.zeros((CAPACITY,)),
    }
    zero = jnp.zeros((), jnp.int32)
    return Seed(key, params, params, OPTIMIZER.init(params), env_state, obs, zero, buf, zero,
                jnp.zeros(()), jnp.zeros((LAST,)), zero)  # fmt: skip


def loss_fn(params: dict, target: dict, batch: dict) -> jax.Array:
    q = jnp.take_along_axis(q_values(params, batch["obs"]), batch["action"][:, None], axis=1)[:, 0]
    bootstrap = q_values(target, batch["next_obs"]).max(axis=1)
    y = batch["reward"] + GAMMA * (1.0 - batch["terminated"]) * bootstrap
    return jnp.mean((q - jax.lax.stop_gradient(y)) ** 2)


def select(flag: jax.Array, a, b):
    """``a`` where ``flag``, else ``b``, leaf by leaf over a tree."""
    return jax.tree_util.tree_map(lambda x, y: jnp.where(flag, x, y), a, b)


def make_step(env, env_params):
    def step(s: Seed, _) -> tuple[Seed, None]:
        key, k_explore, k_action, k_env, k_sample = jax.random.split(s.key, 5)
        # act: ε-greedy with ε linear over the first EPS_STEPS steps
        eps = jnp.maximum(EPS_START + (EPS_END - EPS_START) * s.t / EPS_STEPS, EPS_END)
        greedy = jnp.argmax(q_values(s.params, s.obs)).astype(jnp.int32)
        explore = jax.random.uniform(k_explore) < eps
        action = jnp.where(explore, jax.random.randint(k_action, (), 0, N_ACTIONS), greedy)
        # env step; gymnax resets on termination or truncation, info["final_observation"] is the true next state
        obs, env_state, reward, terminated, truncated, info = env.step(k_env, s.env, action, env_params)
        done = jnp.logical_or(terminated, truncated)
        # write the transition into the ring
        slot = s.t % CAPACITY
        new = {"obs": s.obs, "action": action, "reward": reward, "next_obs": info["final_observation"],
               "terminated": terminated.astype(jnp.float32)}  # fmt: skip
        buf = {k: s.buf[k].at[slot].set(new[k]) for k in s.buf}
        size = jnp.minimum(s.size + 1, CAPACITY)
        # sample (uniform, with replacement) and update, kept only from the first full batch on
        idx = jax.random.randint(k_sample, (BATCH,), 0, size)
        batch = {k: v[idx] for k, v in buf.items()}
        grads = jax.grad(loss_fn)(s.params, s.target, batch)
        updates, opt = OPTIMIZER.update(grads, s.opt, s.params)
        learn = s.t + 1 >= LEARN_FROM
        params = select(learn, optax.apply_updates(s.params, updates), s.params)
        opt = select(learn, opt, s.opt)
        # the target copied at each episode's end, after that step's update
        target = select(done, params, s.target)
        ep_return = s.ep_return + reward
        returns = jnp.where(done, s.returns.at[s.episodes % LAST].set(ep_return), s.returns)
        return Seed(key, params, target, opt, env_state, obs, s.t + 1, buf, size,
                    jnp.where(done, 0.0, ep_return), returns, s.episodes + done), None  # fmt: skip

    return step


def build(n_seeds: int, chunk: int):
    """(the initial states of seeds 1..n_seeds, the AOT-compiled chunk of ``chunk`` steps, its compile time)."""
    env, env_params = make_env()
    step = make_step(env, env_params)
    keys = jax.vmap(jax.random.key)(jnp.arange(1, n_seeds + 1))
    init = jax.jit(jax.vmap(lambda k: init_seed(k, env, env_params)))(keys)
    jax.block_until_ready(init)

    def run_chunk(states: Seed) -> Seed:
        return jax.vmap(lambda s: jax.lax.scan(step, s, None, length=chunk)[0])(states)

    t = time.perf_counter()
    compiled = jax.jit(run_chunk).lower(init).compile()
    return init, compiled, time.perf_counter() - t


def run_anchor(init: Seed, compiled, steps: int, chunk: int) -> tuple[Seed, float, float]:
    """(the final states, wall s, CPU s) of ``steps`` steps per seed from ``init``."""
    wall, cpu = time.perf_counter(), time.process_time()
    states = init
    for _ in range(steps // chunk):
        states = compiled(states)
    jax.block_until_ready(states)
    return states, time.perf_counter() - wall, time.process_time() - cpu


def versions() -> str:
    return ", ".join(f"{p} {md.version(p)}" for p in ("jax", "jaxlib", "gymnax", "optax"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=None, help="env steps per seed (2000; --learn: 20000)")
    parser.add_argument("--seeds", type=int, default=None, help="S, the seeds (100; --learn: 16)")
    parser.add_argument("--chunk", type=int, default=500, help="steps per compiled scan (divides --steps)")
    parser.add_argument("--no-per", action="store_true", help="time the JAX anchor only")
    parser.add_argument("--learn", action="store_true", help="the learning check: mean return of the last 20")
    args = parser.parse_args()
    steps = args.steps or (20_000 if args.learn else 2_000)
    n_seeds = args.seeds or (16 if args.learn else 100)
    chunk = min(args.chunk, steps)
    if steps % chunk:
        parser.error(f"--chunk {chunk} must divide --steps {steps}")
    print(f"{versions()}; devices {jax.devices()}")
    print(f"protocol: configs/seed001/cartpole_uniform.yaml, S = {n_seeds}, {steps} env steps per seed, no eval")

    init, compiled, compile_s = build(n_seeds, chunk)
    print(f"JAX: compile {compile_s:.2f} s (one scan of {chunk} steps over {n_seeds} seeds)")
    _, warm_wall, _ = run_anchor(init, compiled, chunk, chunk)
    final, wall, cpu = run_anchor(init, compiled, steps, chunk)
    seed_steps = n_seeds * steps
    jax_wall, jax_cpu = wall / seed_steps * 1e6, cpu / seed_steps * 1e6
    print(f"JAX: warm-up chunk {warm_wall:.2f} s; measured {wall:.2f} s wall, {cpu:.2f} s CPU: "
          f"{jax_wall:.2f} µs wall, {jax_cpu:.2f} µs CPU per seed-step")  # fmt: skip

    if args.learn:
        episodes = final.episodes
        finished = jnp.minimum(episodes, LAST)
        last = jnp.where(finished > 0, final.returns.sum(axis=1) / jnp.maximum(finished, 1), jnp.nan)
        lo, hi = int(episodes.min()), int(episodes.max())
        print(f"learning check: mean over {n_seeds} seeds of the last {LAST} episode returns = "
              f"{float(jnp.nanmean(last)):.1f} (seeds: min {float(jnp.nanmin(last)):.1f}, "
              f"max {float(jnp.nanmax(last)):.1f}; episodes per seed {lo}-{hi})")  # fmt: skip
        return
    if args.no_per:
        return

    import cohort_throughput as ct  # per's cohort, timed as its throughput benchmark times it

    ct.run(2, 200)  # warm-up: numba's kernels loaded or compiled, gymnasium imported
    r = ct.run(n_seeds, steps)
    per_wall, per_cpu = r["wall"] / r["env_steps"] * 1e6, r["cpu"] / r["env_steps"] * 1e6
    print(f"per: measured {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU: "
          f"{per_wall:.2f} µs wall, {per_cpu:.2f} µs CPU per seed-step")  # fmt: skip
    print(f"per / JAX at S = {n_seeds}: {per_wall / jax_wall:.1f}x wall, {per_cpu / jax_cpu:.1f}x CPU")


if __name__ == "__main__":
    main()
