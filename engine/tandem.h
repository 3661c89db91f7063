#pragma once
/// Everything a user of the engine needs: tensors, autograd and every op family.

#include "engine/autograd/grad_mode.h"
#include "engine/backend.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/ops/loss.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/optim.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "engine/threads.h"
