#pragma once
/// Naive reference implementations (plain loops over std::vector, in double) that
/// the oneDNN-backed kernels are compared against.
