// coil::nn and coil::optim in one include (coil/coil.h includes it): modules, the models (ResNet,
// GPT-2), checkpoints (state_dict, safetensors), coil::compile(module) and the optimizers.
#pragma once

#include <coil/nn/activation.h>
#include <coil/nn/attention.h>
#include <coil/nn/compile.h>
#include <coil/nn/container.h>
#include <coil/nn/conv.h>
#include <coil/nn/dropout.h>
#include <coil/nn/embedding.h>
#include <coil/nn/flatten.h>
#include <coil/nn/gpt2.h>
#include <coil/nn/init.h>
#include <coil/nn/linear.h>
#include <coil/nn/module.h>
#include <coil/nn/normalization.h>
#include <coil/nn/resnet.h>
#include <coil/nn/safetensors.h>
#include <coil/nn/state_dict.h>
#include <coil/optim.h>
