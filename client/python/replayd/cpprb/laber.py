"""cpprb's LaBER (Large Batch Experience Replay, arXiv:2110.01528): sub-sample a batch by
surrogate priorities from a large uniform batch (``m * batch_size`` transitions from
``ReplayBuffer.sample``). Pure client-side numpy, the same math as cpprb:

    p = (priorities + eps) / sum(priorities + eps)
    indexes ~ choice(m * batch_size, batch_size, p=p)      (with replacement)
    weights: LaBERmean  mean(p) / p[indexes]
             LaBERlazy  1 / p[indexes]
             LaBERmax   (1 / p[indexes]) / max(1 / p[indexes])

``indexes`` are positions in the large batch (not buffer keys), as in cpprb. The RNG is
``self.rng`` (``numpy.random.default_rng()``); assign a seeded one to reproduce a run.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

__all__ = ["LaBER", "LaBERmean", "LaBERlazy", "LaBERmax"]


class LaBER:
    """Base class; use LaBERmean, LaBERlazy or LaBERmax.

    Args:
        batch_size: transitions returned per call (> 0).
        m: the large batch holds ``m * batch_size`` transitions (> 0; default 4).
        eps: added to every priority (>= 0; default 1e-6; with 0, a priority 0 is never drawn).
    """

    def __init__(self, batch_size: int, m: int = 4, *, eps: float = 1e-6) -> None:
        self.rng = np.random.default_rng()
        self.batch_size = int(batch_size)
        if self.batch_size <= 0:
            raise ValueError("`batch_size` must be positive integer.")
        if m <= 0:
            raise ValueError("`m` must be positive integer")
        self.idx = np.arange(int(self.batch_size * m))
        self.eps = float(eps)
        if self.eps < 0:
            raise ValueError(f"`eps` must be non negative, got {eps!r}")

    def __call__(self, *, priorities: Any, **kwargs: Any) -> Dict[str, Any]:
        """Sub-samples `batch_size` rows of every array in `kwargs` (the large batch) with
        probability proportional to ``priorities + eps``; adds ``weights`` and ``indexes``.
        Raises ValueError when `priorities` does not hold ``m * batch_size`` values."""
        p = np.asarray(priorities) + self.eps
        p = p / p.sum()
        chosen = self.rng.choice(self.idx, self.batch_size, p=p)
        out: Dict[str, Any] = {name: value[chosen] for name, value in kwargs.items()}
        out["weights"] = self._normalize_weight(p, chosen)
        out["indexes"] = chosen
        return out

    def _normalize_weight(self, p: np.ndarray[Any, Any],
                          chosen: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        raise NotImplementedError


class LaBERmean(LaBER):
    """Weights ``mean(p) / p[indexes]`` (the paper's LaBER-mean)."""

    def _normalize_weight(self, p: np.ndarray[Any, Any],
                          chosen: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        result: np.ndarray[Any, Any] = p.mean() / p[chosen]
        return result


class LaBERlazy(LaBER):
    """Weights ``1 / p[indexes]`` (LaBER-lazy)."""

    def _normalize_weight(self, p: np.ndarray[Any, Any],
                          chosen: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        result: np.ndarray[Any, Any] = 1.0 / p[chosen]
        return result


class LaBERmax(LaBER):
    """Weights ``(1 / p[indexes]) / max(1 / p[indexes])`` (LaBER-max)."""

    def _normalize_weight(self, p: np.ndarray[Any, Any],
                          chosen: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        inverse = 1.0 / p[chosen]
        result: np.ndarray[Any, Any] = inverse / inverse.max()
        return result
