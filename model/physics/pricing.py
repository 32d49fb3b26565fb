"""Two ways to price a cost term: exactly at a placement, or as a lower bound over placements.

Every cost of an iteration — the ops' collectives (:mod:`model.physics.block`), the pipeline's p2p
messages, the data-parallel and FSDP collectives and their overlap with the blocks' compute,
offload transfers (:mod:`model.physics.pipeline`, :mod:`model.physics.offload`) — is written once,
in terms of the four primitives of a :class:`Pricing`:

* ``collective(kind, V, n, τ)``: one collective over a group of n GPUs, τ per NVLink domain;
* ``p2p(V, pp, nv_pp)``: the mean pipeline message over the pp − 1 stage links;
* ``hidden(T, C)``: what a collective of T seconds overlapped with C seconds of compute adds;
* ``excess(T, C)``: a transfer of T seconds hidden behind C seconds of compute, beyond it.

:class:`Exact` prices a placed configuration (the model's times). :class:`Bound` prices a shape
(a configuration without its NVLink placement) with a time that no placement of it beats: the
exact pruning of a search (:mod:`model.engine.pruning`) needs it. Every term of the model is
non-decreasing in each primitive's value, so a bound of each primitive bounds the whole; a new
cost term written with these primitives gets its bound for free, and the bound cannot drift from
the model. The bound rules:

* collective: the cheapest placement's ring, all-to-all or dispatch
  (:func:`~model.physics.collectives.collective_lower_bound_s`);
* p2p: the cheaper of a slow and a fast message on every stage link (0 in the paper mode, whose
  cross-domain links are free);
* hidden(T, C) = max(T − C, 0) + γ·min(T, C) exactly (γ = ``overlap_slowdown``). In a bound the
  block times C are bounds themselves and the excess max(T − C, 0) shrinks as C grows, so only
  γ·min(T, C) is kept (non-decreasing in T and C);
* excess(T, C) = max(T − C, 0) exactly; 0 in a bound, for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.physics.collectives import (
    Collective,
    collective_lower_bound_s,
    collective_time_s,
    overlapped_s,
    p2p_messages_s,
    p2p_time_s,
)
from model.specs.hardware import System
from model.specs.modes import Mode


@dataclass(frozen=True)
class Pricing:
    """How the primitives are priced for one system and model mode (see the module docstring)."""

    system: System
    mode: Mode
    breakdown = True  # whether results carry the time breakdown and FLOPs (a bound: time only)

    def collective(self, kind: Collective, volume_bytes, group, tau,
                   fanout: float = 1.0, max_domains: float = 0.0) -> np.ndarray:
        """``fanout``: copies per token of a deduplicating dispatch (its top_k);
        ``max_domains``: the NVLink domains its experts may lie in (0: any)."""
        raise NotImplementedError

    def p2p(self, volume_bytes, pp, nv_pp) -> np.ndarray:
        raise NotImplementedError

    def hidden(self, t_comm_s, t_compute_s):
        raise NotImplementedError

    def excess(self, t_move_s, t_compute_s):
        raise NotImplementedError


class Exact(Pricing):
    """The time of a placed configuration."""

    def collective(self, kind: Collective, volume_bytes, group, tau,
                   fanout: float = 1.0, max_domains: float = 0.0) -> np.ndarray:
        return collective_time_s(kind, volume_bytes, group, tau, self.system,
                                 self.mode.allreduce_half_counted, fanout, max_domains)

    def p2p(self, volume_bytes, pp, nv_pp) -> np.ndarray:
        return p2p_time_s(volume_bytes, pp, nv_pp, self.system,
                          self.mode.free_slow_pipeline_links)

    def hidden(self, t_comm_s, t_compute_s):
        return overlapped_s(t_comm_s, t_compute_s, self.system.overlap_slowdown)

    def excess(self, t_move_s, t_compute_s):
        return np.maximum(t_move_s - t_compute_s, 0.0)


class Bound(Pricing):
    """A time no placement of a shape beats (``tau`` and ``nv_pp`` are ignored)."""

    breakdown = False

    def collective(self, kind: Collective, volume_bytes, group, tau,
                   fanout: float = 1.0, max_domains: float = 0.0) -> np.ndarray:
        return collective_lower_bound_s(kind, volume_bytes, group, self.system,
                                        self.mode.allreduce_half_counted, fanout, max_domains)

    def p2p(self, volume_bytes, pp, nv_pp) -> np.ndarray:
        if self.mode.free_slow_pipeline_links:
            return np.zeros_like(np.asarray(volume_bytes, dtype=float) * pp)
        slow, fast = p2p_messages_s(volume_bytes, self.system)
        return np.where(pp > 1, np.minimum(slow, fast), 0.0)

    def hidden(self, t_comm_s, t_compute_s):
        g = self.system.overlap_slowdown
        return g * np.minimum(t_comm_s, t_compute_s) if g else 0.0 * t_comm_s

    def excess(self, t_move_s, t_compute_s):
        return 0.0 * (t_move_s + t_compute_s)
