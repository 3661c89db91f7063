#include "tests/support/reference_ops.h"
