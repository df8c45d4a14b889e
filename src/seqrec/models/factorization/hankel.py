"""Hankelization for LA-SATF (Frolov & Oseledets 2023, Sec. V; equations rebuilt from the prose).

A positional vector ``p`` of length ``K`` becomes the ``K_L x K_S`` Hankel matrix
``H(p)[l, s] = p[l + s]`` (0-based, ``K = K_L + K_S - 1``): one item seen at position ``k`` fills
the anti-diagonal ``l + s = k``. The fourth-order tensor is ``X~[i, j, l, s] = X[i, j, l + s]``
and never exists: every product with it reduces to products with the third-order positional
tensor through two identities used here:

* compressing modes 3 and 4 by ``P_L [K_L, r3]`` and ``P_S [K_S, r4]`` turns position ``k`` into
  the row ``sum_{l + s = k} P_L[l] (x) P_S[s]`` (:func:`hankel_compress`, a "convolution" of
  the two factor matrices), so the user and item modes of LA-SATF are the GA-SATF ones with that
  ``[K, r3 r4]`` positional factor;
* the Gram matrix of the mode-3 (mode-4) compressed unfolding is a windowed sum of the ``K x K``
  Gram ``C = T T^T`` of the position-mode unfolding (:func:`local_gram`, :func:`series_gram`).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def hankelize(p: np.ndarray, window: int) -> np.ndarray:
    """``H(p)[..., l, s] = p[..., l + s]`` with ``l < window`` (tests and documentation)."""
    k = p.shape[-1]
    idx = np.arange(window)[:, None] + np.arange(k - window + 1)[None, :]
    return p[..., idx]


def hankel_compress(p_l: np.ndarray, p_s: np.ndarray) -> np.ndarray:
    """``out[k, a * r4 + b] = sum_{l + s = k} p_l[l, a] p_s[s, b]``, shape ``[K_L + K_S - 1,
    r3 * r4]`` (column order matches a Kronecker product with the local mode first)."""
    k_l, r3 = p_l.shape
    k_s, r4 = p_s.shape
    out = np.zeros((k_l + k_s - 1, r3, r4))
    for l_ in range(k_l):
        out[l_ : l_ + k_s] += p_l[l_][None, :, None] * p_s[:, None, :]
    return out.reshape(k_l + k_s - 1, r3 * r4)


def local_gram(c: np.ndarray, p_s: np.ndarray, window: int) -> np.ndarray:
    """Gram ``[K_L, K_L]`` of the mode-3 unfolding compressed by ``p_s`` on mode 4:
    ``G[l, l'] = sum_{s, s'} C[l + s, l' + s'] (p_s p_s^T)[s, s']``."""
    k_s = c.shape[0] - window + 1
    blocks = sliding_window_view(c, (k_s, k_s))  # [K_L, K_L, K_S, K_S]
    return np.einsum("abst,st->ab", blocks, p_s @ p_s.T)


def series_gram(c: np.ndarray, p_l: np.ndarray, window: int) -> np.ndarray:
    """Gram ``[K_S, K_S]`` of the mode-4 unfolding compressed by ``p_l`` (= ``A_L W_L``) on
    mode 3: ``G[s, s'] = sum_{l, l'} C[l + s, l' + s'] (p_l p_l^T)[l, l']``."""
    blocks = sliding_window_view(c, (window, window))  # [K_S, K_S, K_L, K_L]
    return np.einsum("abst,st->ab", blocks, p_l @ p_l.T)


def last_position_weights(local_last: np.ndarray, series_last: np.ndarray) -> np.ndarray:
    """Length-``K`` weights of the LA-SATF prediction rule (paper eqs. 20-21 rebuilt):
    ``h[k] = sum_{l + s = k} alpha[l] beta[s]`` with ``alpha = A_L W_L w_hat_{K_L}`` and
    ``beta = W_S w_{K_S}`` — the last fibre of the folded-in relevance tensor."""
    return np.convolve(local_last, series_last)
