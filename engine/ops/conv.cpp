#include "engine/ops/conv.h"

#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/profiler.h"

namespace tandem {

namespace {

// Checks conv2d's arguments and returns the output's shape.
Shape conv2d_output_shape(const Tensor& x, const Tensor& weight, const Tensor& bias,
                          const Conv2dOptions& options) {
  // float32, or bfloat16 input and weight with a float32 bias (Note [bfloat16 activations]).
  ops::check_float_activation("conv2d", "input", x);
  ops::check_dtype("conv2d", "weight", weight, x.dtype());
  ops::check_dim("conv2d", "input", x, 4);
  ops::check_dim("conv2d", "weight", weight, 4);
  ops::check_same_device("conv2d", {&x, &weight, &bias});
  TANDEM_CHECK(x.size(1) == weight.size(1), "[conv2d] input has ", x.size(1),
               " channels but weight expects ", weight.size(1), " (weight shape ",
               shape_str(weight.shape()), ")");
  if (bias.defined()) {
    ops::check_dtype("conv2d", "bias", bias, DType::Float32);
    ops::check_shape("conv2d", "bias", bias, {weight.size(0)});
  }
  TANDEM_CHECK(options.stride >= 1 && options.padding >= 0,
               "[conv2d] needs stride >= 1 and padding >= 0, got stride ", options.stride,
               " padding ", options.padding);
  const int64_t padded_h = x.size(2) + 2 * options.padding;
  const int64_t padded_w = x.size(3) + 2 * options.padding;
  TANDEM_CHECK(weight.size(2) <= padded_h && weight.size(3) <= padded_w, "[conv2d] kernel ",
               weight.size(2), "x", weight.size(3), " is larger than the padded input ", padded_h,
               "x", padded_w, " (input shape ", shape_str(x.shape()), ")");
  return {x.size(0), weight.size(0), (padded_h - weight.size(2)) / options.stride + 1,
          (padded_w - weight.size(3)) / options.stride + 1};
}

// A multiply and an add per weight per output value: 2·N·K·P·Q·C·R·S, for the forward and for
// each backward kernel alike.
double conv2d_flops(const Shape& output, const Shape& weight) {
  return 2.0 * static_cast<double>(shape_numel(output) * weight[1] * weight[2] * weight[3]);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options) {
  const Shape out_shape = conv2d_output_shape(x, weight, bias, options);
  const profiler::RecordScope scope("conv2d",
                                    [&] { return conv2d_flops(out_shape, weight.shape()); });

  // Channels-last in, channels-last out (PyTorch's rule: the input's or the weight's format).
  const MemoryFormat format = ops::format_of_inputs({&x, &weight});
  const MemoryFormat compute = ops::kernel_format(x.device(), format);
  const Tensor cx = x.detach().contiguous(compute);
  const Tensor cw = compute == MemoryFormat::ChannelsLast && weight.is_dense()
                        ? weight.detach()
                        : weight.detach().contiguous();
  Tensor out =
      empty(out_shape, {.dtype = x.dtype(), .device = x.device(), .memory_format = compute});
  backend_for(x.device())
      .conv2d_forward(cx, cw, bias.defined() ? bias.detach().contiguous() : Tensor(), options, out);
  autograd::record(
      "conv2d", {&x, &weight, &bias}, {&out},
      [cx, cw, options, compute](const std::vector<Tensor>& grads, const std::vector<bool>& needs) {
        TANDEM_CHECK(grads[0].dtype() == cx.dtype(), "[conv2d] backward got a ",
                     dtype_name(grads[0].dtype()), " gradient for a ", dtype_name(cx.dtype()),
                     " output");
        const Tensor grad_y = grads[0].contiguous(compute);
        Backend& backend = backend_for(grad_y.device());
        Tensor grad_x, grad_w, grad_b;
        const auto flops = [&] { return conv2d_flops(grad_y.shape(), cw.shape()); };
        if (needs[0]) {
          const profiler::RecordScope scope("conv2d_backward_input", flops);
          grad_x = empty_like(cx);
          backend.conv2d_backward_input(grad_y, cw, options, grad_x);
        }
        if (needs[1] || needs[2]) {
          const profiler::RecordScope scope("conv2d_backward_weight", flops);
          grad_w = empty_like(cw);
          if (needs[2]) grad_b = empty({cw.size(0)}, {.device = cw.device()});
          backend.conv2d_backward_weight(grad_y, cx, options, grad_w, grad_b);
        }
        return std::vector<Tensor>{grad_x, needs[1] ? grad_w : Tensor(), grad_b};
      });
  // A backend without channels-last kernels computed on contiguous copies: convert back.
  if (compute != format) return out.contiguous(format);
  return out;
}

}  // namespace tandem
