#!/usr/bin/env bash
# On the device machine (PyTorch 2.x with Dynamo), with prebuilt binaries and build/python
# carried (bench/device_prebuilt.sh's carry, with build/python): the Python backend's tests,
# through functorch's AOTAutograd and through torch.compile(backend="coil"), on the CPU and the
# GPU; then the per-call time of a compiled x + 1 on 8 floats against eager's and Inductor's.
cd "$(dirname "$0")/.."
export COIL_LIBRARY=$PWD/build/libcoil.so.0.1.0 PYTHONPATH=$PWD/build/python
bash bench/device_prebuilt.sh \
  "python3 -m unittest discover -s tests/python -v 2>&1 | tail -40" \
  "python3 - <<'PY'
import time, torch, coil
for device in ['cpu', 'cuda']:
    x = torch.randn(8, device=device)
    f = torch.compile(lambda t: t + 1, backend='coil')
    g = torch.compile(lambda t: t + 1)
    for fn, name in [(lambda t: t + 1, 'eager'), (f, 'coil'), (g, 'inductor')]:
        for _ in range(20): fn(x)
        if device == 'cuda': torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000): fn(x)
        if device == 'cuda': torch.cuda.synchronize()
        print(device, name, '%.1f us a call' % ((time.perf_counter() - t0) / 2000 * 1e6))
PY"
