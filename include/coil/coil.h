// Everything a coil user needs: #include <coil/coil.h>
#pragma once

#include <coil/amp.h>
#include <coil/autograd.h>
#include <coil/compile.h>
#include <coil/cuda.h>
#include <coil/device.h>
#include <coil/dtype.h>
#include <coil/error.h>
#include <coil/grad_scaler.h>
#include <coil/nn/all.h>
#include <coil/ops.h>
#include <coil/profiler.h>
#include <coil/scalar.h>
#include <coil/tensor.h>
