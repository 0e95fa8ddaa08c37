#!/usr/bin/env python3
"""The rational fit behind coil's vectorised erf (src/codegen/cpp_prelude.cpp, verf):
erf(x) ~ x * P(x^2) / Q(x^2) on [0, 4], Q(0) = 1, fitted for relative error by linearised
weighted least squares (each round divides by the previous Q) with Lawson's reweighting toward
minimax. Prints the fit's error in float64 and in a float32 evaluation, and the coefficients.
    python3 scripts/fit_erf.py 6 4    # degrees of P and Q in x^2 (what verf uses)
Needs numpy (Debian: python3-numpy)."""
import numpy as np, math, sys
npd, nqd = int(sys.argv[1]), int(sys.argv[2])
X = 4.0
# Chebyshev-distributed samples on [0, X]
N = 4000
x = (1 - np.cos(np.pi * (np.arange(N) + 0.5) / N)) / 2 * X
x = np.concatenate([x, np.linspace(1e-4, X, 4000)])
f = np.array([math.erf(v) for v in x])
t = x * x
w = np.ones_like(x)
qprev = np.ones_like(x)
for it in range(60):
    # unknowns: p0..p_np, q1..q_nq ; x*P(t) - f*(1 + sum q_k t^k) = 0, relative weight
    A = np.hstack([np.vstack([x * t**k for k in range(npd + 1)]).T,
                   np.vstack([-f * t**k for k in range(1, nqd + 1)]).T])
    b = f
    scale = w / (f * qprev)
    sol, *_ = np.linalg.lstsq(A * scale[:, None], b * scale, rcond=None)
    p, q = sol[:npd + 1], np.concatenate([[1.0], sol[npd + 1:]])
    P = np.polyval(p[::-1], t); Q = np.polyval(q[::-1], t)
    approx = x * P / Q
    err = (approx - f) / f
    qprev = Q
    # Lawson: raise weights where the error is large
    w = w * (np.abs(err) / np.abs(err).max()) ** 0.5 + 1e-12 if it > 10 else w
    w /= w.mean()
print("max rel err (double eval)", np.abs(err).max())
# float32 evaluation
xs = np.linspace(0, 4.5, 2000001).astype(np.float32)
ts = (xs * xs).astype(np.float32)
P32 = np.float32(p[-1]) * np.ones_like(ts)
for c in p[-2::-1]: P32 = (P32 * ts + np.float32(c)).astype(np.float32)
Q32 = np.float32(q[-1]) * np.ones_like(ts)
for c in q[-2::-1]: Q32 = (Q32 * ts + np.float32(c)).astype(np.float32)
y = np.minimum((xs * P32 / Q32).astype(np.float32), np.float32(1))
ref = np.array([math.erf(float(v)) for v in xs[::10]])
e = np.abs(y[::10] - ref) / np.maximum(ref, 1e-30)
e[0] = 0
print("float32 max rel err", e.max(), "at", xs[::10][e.argmax()])
print("p =", ", ".join("%.10ef" % c for c in p))
print("q =", ", ".join("%.10ef" % c for c in q))
