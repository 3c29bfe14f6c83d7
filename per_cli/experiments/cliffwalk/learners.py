"""Blind Cliffwalk learners: one Q-learning update at a time, keeping the squared error against the true Q-values up to
date (so that convergence is checked in O(1) per update)."""

from __future__ import annotations

import numpy as np

from per_cli.envs.cliffwalk import BlindCliffwalk

INIT_STD = 0.1


class _Learner:
    """What both learners share: the chain, its discount, the number of Q-values, and the exact squared error of the
    Q-values (:meth:`values`, shape (n, 2)) against the true ones."""

    def __init__(self, mdp: BlindCliffwalk):
        self.mdp, self.gamma, self.size = mdp, mdp.gamma, 2 * mdp.n

    def exact_sse(self) -> float:
        return float(((self.values() - self.mdp.true_q()) ** 2).sum())

    def _deltas_and_errors(self) -> tuple[np.ndarray, np.ndarray]:
        """The δ of updating each distinct transition (s, a), and the error of each Q-value; shape (n, 2) each."""
        q = self.values()
        return _targets(self.mdp, q) - q, q - self.mdp.true_q()


class TabularLearner(_Learner):
    """A table of Q-values, ``Q(s, a) = θ · onehot(s, a)``, initialised like the linear learner's weights,
    ``θ ~ N(0, 0.1²)`` (Schaul et al. 2016, appendix B.1: both representations are ``θᵀφ(s, a)``)."""

    def __init__(self, mdp: BlindCliffwalk, rng: np.random.Generator):
        super().__init__(mdp)
        self.true = mdp.true_q().tolist()
        self.q = rng.normal(0.0, INIT_STD, size=(mdp.n, 2)).tolist()
        self.sse = self.exact_sse()

    def values(self) -> np.ndarray:
        return np.array(self.q)

    def update(self, s: int, a: int, r: float, s2: int, term: bool, step: float) -> float:
        """Apply one update; return its TD error δ (before the update)."""
        q = self.q
        target = r if term else r + self.gamma * max(q[s2])
        old = q[s][a]
        delta = target - old
        new = old + step * delta
        q[s][a] = new
        t = self.true[s][a]
        self.sse += (new - t) ** 2 - (old - t) ** 2
        return delta

    def sse_after_each(self, step: float) -> tuple[np.ndarray, np.ndarray]:
        """For every distinct transition (state s, action a), the squared error after updating it alone, and
        its δ. Both arrays have shape (n, 2)."""
        delta, err = self._deltas_and_errors()
        after = self.sse - err**2 + (err + step * delta) ** 2
        return after, delta


class LinearLearner(_Learner):
    """``Q(s, a) = θ[a, s] + θ[a, n]``: one-hot state features plus a bias, one weight vector per action,
    ``θ ~ N(0, 0.1²)``. An update moves the state's weight and the bias, so it changes ``Q(·, a)`` in every
    state (by ``ηδ``; in ``s`` itself by ``2ηδ``)."""

    def __init__(self, mdp: BlindCliffwalk, rng: np.random.Generator):
        super().__init__(mdp)
        n = self.n = mdp.n
        theta = rng.normal(0.0, INIT_STD, size=(2, n + 1))
        self.w = theta[:, :n].tolist()  # w[a][s]
        self.b = theta[:, n].tolist()  # b[a]
        self.true_t = mdp.true_q().T.tolist()  # true_t[a][s]
        # e[a][s] = w[a][s] - Q*(s, a); the error of Q(s, a) is e[a][s] + b[a]
        self.e = [[self.w[a][s] - self.true_t[a][s] for s in range(n)] for a in range(2)]
        self.s1 = [sum(col) for col in self.e]
        self.s2 = [sum(x * x for x in col) for col in self.e]
        self.sse = self._sse_from_sums()

    def _sse_from_sums(self) -> float:
        return sum(self.s2[a] + 2 * self.b[a] * self.s1[a] + self.n * self.b[a] ** 2 for a in range(2))

    def values(self) -> np.ndarray:
        return (np.array(self.w) + np.array(self.b)[:, None]).T

    def update(self, s: int, a: int, r: float, s2: int, term: bool, step: float) -> float:
        w, b = self.w, self.b
        target = r if term else r + self.gamma * max(w[0][s2] + b[0], w[1][s2] + b[1])
        delta = target - (w[a][s] + b[a])
        c = step * delta
        el = self.e[a][s]
        self.e[a][s] = el + c
        self.s2[a] += (el + c) ** 2 - el * el
        self.s1[a] += c
        w[a][s] += c
        b[a] += c
        self.sse = self._sse_from_sums()
        return delta

    def sse_after_each(self, step: float) -> tuple[np.ndarray, np.ndarray]:
        delta, err = self._deltas_and_errors()
        c = step * delta
        col_sse = (err**2).sum(axis=0)  # per action
        col_sum = err.sum(axis=0)
        # updating (s, a) adds c to every Q(·, a) through the bias and another c to Q(s, a)
        col_after = col_sse[None, :] + 2 * c * col_sum[None, :] + self.n * c**2
        col_after += (err + 2 * c) ** 2 - (err + c) ** 2
        after = col_after + (col_sse.sum() - col_sse)[None, :]
        return after, delta


def _targets(mdp: BlindCliffwalk, q: np.ndarray) -> np.ndarray:
    """The Q-learning target of each distinct transition (s, a), shape (n, 2)."""
    n = mdp.n
    states = np.arange(n)
    right = mdp.right_action(states)
    targets = np.zeros((n, 2))
    onward = np.append(mdp.gamma * q[1:].max(axis=1), 1.0)  # right in the last state: reward 1, terminal
    targets[states, right] = onward
    return targets


LEARNER_CLASSES = {"tabular": TabularLearner, "linear": LinearLearner}


def converged(learner, sse_tol: float) -> bool:
    """The running sum can drift by rounding: confirm a crossing with the exact error."""
    if learner.sse >= sse_tol:
        return False
    learner.sse = learner.exact_sse()
    return learner.sse < sse_tol
