#include "tests/support/gradcheck.h"

#include <cmath>
#include <sstream>

namespace tandem::testing {
namespace {

// Σ out·r in double, evaluated without autograd.
double projected_loss(const TensorFunction& fn, const std::vector<Tensor>& inputs,
                      const std::vector<float>& direction) {
  NoGradGuard no_grad;
  const std::vector<float> out = fn(inputs).to_vector<float>();
  double total = 0.0;
  for (size_t i = 0; i < out.size(); ++i) total += static_cast<double>(out[i]) * direction[i];
  return total;
}

// A fresh leaf holding `values`, on the device of `like`.
Tensor leaf_like(const Tensor& like, const std::vector<float>& values, bool requires_grad) {
  return from_vector(values, like.shape(),
                     {.device = like.device(), .requires_grad = requires_grad});
}

}  // namespace

::testing::AssertionResult check_gradients(const TensorFunction& fn,
                                           const std::vector<Tensor>& inputs,
                                           const GradCheckOptions& options) {
  // Analytic gradients, through backward.
  std::vector<Tensor> leaves;
  for (const Tensor& input : inputs) {
    const bool differentiable = input.defined() && input.requires_grad();
    leaves.push_back(differentiable ? leaf_like(input, input.to_vector<float>(), true) : input);
  }
  const Tensor out = fn(leaves);
  Generator generator(options.seed);
  const Tensor direction_tensor = randn(out.shape(), generator, {.device = out.device()});
  const std::vector<float> direction = direction_tensor.to_vector<float>();
  sum(mul(out, direction_tensor)).backward();

  std::ostringstream failures;
  int failure_count = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    const Tensor grad = leaves[i].grad();
    if (!grad.defined())
      return ::testing::AssertionFailure() << "input " << i << " received no gradient";
    const std::vector<float> analytic = grad.to_vector<float>();
    std::vector<float> values = inputs[i].to_vector<float>();
    std::vector<Tensor> probe = leaves;
    for (size_t j = 0; j < values.size(); ++j) {
      const float original = values[j];
      values[j] = original + options.eps;
      probe[i] = leaf_like(inputs[i], values, false);
      const double plus = projected_loss(fn, probe, direction);
      values[j] = original - options.eps;
      probe[i] = leaf_like(inputs[i], values, false);
      const double minus = projected_loss(fn, probe, direction);
      values[j] = original;
      const double numeric = (plus - minus) / (2.0 * options.eps);
      const double error = std::abs(analytic[j] - numeric);
      if (error > options.atol + options.rtol * std::abs(numeric)) {
        if (++failure_count <= 5) {
          failures << "\n  input " << i << " element " << j << ": analytic " << analytic[j]
                   << ", numeric " << numeric;
        }
      }
    }
  }
  if (failure_count > 0) {
    return ::testing::AssertionFailure() << failure_count << " gradient element(s) disagree with "
                                         << "finite differences:" << failures.str();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::testing
