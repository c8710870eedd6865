"""Weighted least squares on per-joint normal equations: solves, compression to p rows,
the covariance with the filtered noise's correlation, and the essential parameters
(Pham & Gautier 1991)."""

import math

import numpy as np

from robot_dynamics.identification.arm.libraries import _require


def _weighted(G_j, h_j, weights, columns):
    """Σ_j w_j G_j and Σ_j w_j h_j, restricted to `columns` (None: all)."""
    G = np.tensordot(weights, G_j, axes=1)
    h = weights @ h_j
    if columns is not None:
        G, h = G[np.ix_(columns, columns)], h[columns]
    return G, h


def _normal_solve(G, h):
    """Least-squares solution of the normal equations G x = h (columns scaled first;
    directions without information left at zero)."""
    d = np.sqrt(np.diag(G))
    d = np.where(d > 0.0, d, 1.0)
    eigenvalues, vectors = np.linalg.eigh(G / np.outer(d, d))
    kept = eigenvalues > 1e-12 * eigenvalues[-1]
    x = vectors[:, kept] @ ((vectors[:, kept].T @ (h / d)) / eigenvalues[kept])
    return x / d


def _compress(G, h):
    """R (r, p), z (r,) with ‖R φ − z‖² = φᵀ G φ − 2 hᵀ φ + const (G = AᵀA, h = Aᵀb):
    the least-squares problem ‖A φ − b‖² in p unknowns whatever A's number of rows."""
    d = np.sqrt(np.diag(G))
    d = np.where(d > 0.0, d, 1.0)
    eigenvalues, vectors = np.linalg.eigh(G / np.outer(d, d))
    kept = eigenvalues > 1e-13 * eigenvalues[-1]
    root = np.sqrt(eigenvalues[kept])
    R = (root[:, None] * vectors[:, kept].T) * d[None, :]
    z = (vectors[:, kept].T @ (h / d)) / root
    return R, z


def _noise_shape(rate, decimation, cutoff, frequencies):
    """The power spectrum, relative to its mean, at `frequencies` [Hz] of white noise at
    `rate` Hz after `_prepare`'s zero-phase filter (|H(f)|⁴: the Butterworth filter run
    forward and backward) and the decimation by `decimation` (aliases summed)."""
    signal = _require('scipy.signal')
    sos = signal.butter(4, min(float(cutoff), 0.4 * rate), fs=rate, output='sos')
    decimated = rate / decimation
    total = np.zeros(len(frequencies))
    for alias in range(-decimation, decimation + 1):
        f = np.abs(frequencies + alias * decimated)
        inside = f <= rate / 2.0
        if np.any(inside):
            _, response = signal.sosfreqz(sos, worN=f[inside], fs=rate)
            total[inside] += np.abs(response) ** 4
    return total


def _long_run(A, r, positions, shape):
    """Cov(Aᵀ e) = Σ_s Σ_t a_s a_tᵀ γ(s − t) (P, P) for noise e on rows A (N, P) at sample
    indices `positions` (rows left out are zeros on that grid) with the residuals r's
    variance and the spectral shape `shape(F) -> (F // 2 + 1,)` (relative to its mean;
    `_noise_shape`), computed in the frequency domain, zero-padded to twice the length
    so that the correlations are linear, not circular."""
    N = len(r)
    if N == 0:
        return np.zeros((A.shape[1], A.shape[1]))
    variance = float(r @ r) / N
    full = np.zeros((int(positions[-1]) + 1, A.shape[1]))
    full[positions] = A
    F = 2 * full.shape[0]
    F += F % 2                              # even: the last bin is the Nyquist one
    A_hat = np.fft.rfft(full, n=F, axis=0)
    S = variance * shape(F)
    weight = np.full(len(S), 2.0)
    weight[0] = weight[-1] = 1.0
    band = S > 1e-9 * np.max(S)             # the filter's stop band adds nothing
    X = A_hat[band] * np.sqrt(weight[band] * S[band] / F)[:, None]
    return np.einsum('fp,fq->pq', X.real, X.real) + np.einsum('fp,fq->pq', X.imag, X.imag)


def _inverse(G, h=None):
    """G⁻¹ (or G⁻¹ h) of a symmetric positive semi-definite G: columns scaled to a unit
    diagonal, a ridge of 1e-12 for directions without information. An LU solve rather
    than an eigendecomposition: called in loops, and LAPACK's eigensolvers can be tens of
    times slower on a loaded machine."""
    d = np.sqrt(np.diag(G))
    d = np.where(d > 0.0, d, 1.0)
    scaled = G / np.outer(d, d) + 1e-12 * np.eye(len(d))
    if h is not None:
        return np.linalg.solve(scaled, h / d) / d
    return np.linalg.solve(scaled, np.eye(len(d))) / np.outer(d, d)


def _wls_statistics(G_j, h_j, yy, counts, weights, inflation, columns):
    """Weighted least squares on `columns` from per-joint normal equations: (x, covariance,
    per-joint residual sums of squares). Covariance G⁻¹ (Σ_j w_j² v_j c_j G_j) G⁻¹ with
    v_j = ‖r_j‖² / (N_j − p N_j / N) the joint's residual variance and c_j its correlation
    inflation: with one common variance and c = 1 the textbook σ² (WᵀW)⁻¹,
    σ² = ‖W r‖² / (N − p)."""
    G, h = _weighted(G_j, h_j, weights, columns)
    inverse = _inverse(G)
    x = inverse @ h
    sub = G_j[:, columns][:, :, columns]
    rss = yy - 2.0 * h_j[:, columns] @ x + np.einsum('p,jpq,q->j', x, sub, x)
    rss = np.maximum(rss, 0.0)
    total = max(float(np.sum(counts)), 1.0)
    dof = np.maximum(counts - len(columns) * counts / total, 1.0)
    variance = rss / dof
    middle = np.tensordot(weights ** 2 * variance * inflation, sub, axes=1)
    return x, inverse @ middle @ inverse, rss


def essential_parameters(G_j, h_j, yy, counts, weights, inflation, columns, ratio=100.0,
                         keep=()):
    """Indices (into `columns`) of the essential parameters (Pham & Gautier 1991; Khalil &
    Dombre 2002, §12.5): starting from all of them, the parameter with the largest
    relative standard deviation is dropped and the rest estimated again, until the
    largest relative standard deviation is at most `ratio` times the smallest. Entries
    of `keep` (indices into `columns`) are never dropped."""
    active = list(range(len(columns)))
    while len(active) > 1:
        x, covariance, _ = _wls_statistics(G_j, h_j, yy, counts, weights, inflation,
                                           [columns[a] for a in active])
        with np.errstate(divide='ignore', invalid='ignore'):
            relative = np.sqrt(np.maximum(np.diag(covariance), 0.0)) / np.abs(x)
        relative = np.where(np.isfinite(relative), relative, math.inf)
        candidates = [c for c, a in enumerate(active) if a not in keep]
        if not candidates:
            break
        smallest = float(np.min(relative))
        worst = max(candidates, key=lambda c: relative[c])
        if relative[worst] <= ratio * smallest:
            break
        del active[worst]
    return active
