#!/usr/bin/env python3
"""The series behind coil's vectorised tanh for |x| < 0.625 (src/backends/cpu/cpp_prelude.cpp,
vtanh): tanh(x) ~ x + x^3 P(x^2), P a Chebyshev fit of (tanh(x) - x) / x^3 in t = x^2 on
[0, 0.390625]. Prints the fit's largest relative error of tanh over (0, 0.625] (in 40-digit
arithmetic) and P's coefficients, highest degree first.
    python3 scripts/fit_tanh.py 6    # coefficients (degree + 1; what vtanh uses)
Needs mpmath (Debian: python3-mpmath)."""
import sys

import mpmath as mp

mp.mp.dps = 40
n = int(sys.argv[1]) if len(sys.argv) > 1 else 6
edge = mp.mpf("0.625")


def p_of(t):
    x = mp.sqrt(t)
    return (mp.tanh(x) - x) / x**3


coeffs = mp.chebyfit(p_of, [0, edge * edge], n)
worst = max(abs((x + x**3 * mp.polyval(coeffs, x * x)) / mp.tanh(x) - 1)
            for x in (edge * i / 4000 for i in range(1, 4001)))
print(f"largest relative error over (0, {edge}]: {mp.nstr(worst, 3)}")
print(", ".join(mp.nstr(c, 12) for c in coeffs))
