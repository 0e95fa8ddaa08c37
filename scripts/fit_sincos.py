#!/usr/bin/env python3
"""The polynomials behind coil's vectorised sin and cos (src/codegen/cpp_prelude.cpp, vsincos):
on r in [-pi/4, pi/4], sin(r) ~ r (1 + z S(z)) and cos(r) ~ 1 - z/2 + z^2 C(z) with z = r^2,
S and C of degree 2, fitted by weighted least squares for relative error with Lawson's
reweighting toward minimax. Prints each fit's error in float64 and in a float32 evaluation,
the coefficients, and pi/2 in the four parts the range reduction subtracts.
    python3 scripts/fit_sincos.py
Needs numpy (Debian: python3-numpy)."""
import math
import struct
from fractions import Fraction

import numpy as np

R = math.pi / 4
N = 6000
r = (1 - np.cos(np.pi * (np.arange(N) + 0.5) / N)) / 2 * R
r = np.concatenate([r, np.linspace(1e-4, R, 4000)])
z = r * r


def fit(f, base, lead, deg):
    """Coefficients c_k of f ~ base + lead * sum c_k z^k, weighted for relative error."""
    w = np.ones_like(r)
    for it in range(40):
        A = np.vstack([lead * z**k for k in range(deg + 1)]).T
        scale = w / np.abs(f)
        c, *_ = np.linalg.lstsq(A * scale[:, None], (f - base) * scale, rcond=None)
        err = (base + lead * np.polyval(c[::-1], z) - f) / f
        if it > 5:
            w = w * (np.abs(err) / np.abs(err).max()) ** 0.5 + 1e-12
            w /= w.mean()
    return c, np.abs(err).max()


sin_c, sin_err = fit(np.sin(r), r, r**3, 2)
cos_c, cos_err = fit(np.cos(r), 1 - z / 2, z * z, 2)
print("sin: max rel err (double eval) %.3g" % sin_err)
print("cos: max rel err (double eval) %.3g" % cos_err)

# float32 evaluation in the kernel's order, each step rounded to float32
f32 = np.float32
xs = np.linspace(-R, R, 2000001).astype(f32)
zs = (xs * xs).astype(f32)


def horner(coeffs):
    p = np.full_like(zs, f32(coeffs[-1]))
    for k in coeffs[-2::-1]:
        p = (p * zs + f32(k)).astype(f32)
    return p


s32 = (xs * horner([1.0] + list(sin_c))).astype(f32)
c32 = horner([1.0, -0.5] + list(cos_c))


def ulps(got, want):
    spacing = np.spacing(np.abs(want).astype(f32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


nz = xs != 0
print("sin: float32 evaluation, max %.2f ulp" % ulps(s32[nz], np.sin(xs[nz].astype(np.float64))).max())
print("cos: float32 evaluation, max %.2f ulp" % ulps(c32, np.cos(xs.astype(np.float64))).max())
print("sin coefficients:", ", ".join("%.10e" % f32(v) for v in sin_c))
print("cos coefficients:", ", ".join("%.10e" % f32(v) for v in cos_c))

# pi/2 = A + B + C + D: A, B and C keep 11 significant bits, so q * A, q * B and q * C are
# exact for |q| < 2^13; D is the float nearest what remains.
PIO2 = Fraction("1.570796326794896619231321691639751442098584699687552910487472296153908")


def top_bits(v, bits):
    m, e = math.frexp(v)
    return math.floor(m * 2**bits) / 2**bits * 2**e


rest, parts = PIO2, []
for _ in range(3):
    parts.append(top_bits(float(rest), 11))
    rest -= Fraction(parts[-1])
parts.append(struct.unpack("f", struct.pack("f", float(rest)))[0])
print("pi/2 parts:", ", ".join("%.10e" % p for p in parts))
