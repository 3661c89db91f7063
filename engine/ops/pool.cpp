#include "engine/ops/pool.h"

#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/profiler.h"

namespace tandem {

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  const profiler::RecordScope scope("max_pool2d");
  ops::check_float_activation("max_pool2d", "input", x);
  ops::check_dim("max_pool2d", "input", x, 4);
  TANDEM_CHECK(options.kernel_size >= 1 && options.stride >= 1 && options.padding >= 0,
               "[max_pool2d] needs kernel_size >= 1, stride >= 1, padding >= 0");
  TANDEM_CHECK(2 * options.padding <= options.kernel_size, "[max_pool2d] padding ", options.padding,
               " is more than half the kernel size ", options.kernel_size);
  const int64_t padded_h = x.size(2) + 2 * options.padding;
  const int64_t padded_w = x.size(3) + 2 * options.padding;
  TANDEM_CHECK(options.kernel_size <= padded_h && options.kernel_size <= padded_w,
               "[max_pool2d] kernel ", options.kernel_size,
               " is larger than the padded input (input shape ", shape_str(x.shape()), ")");
  const Shape out_shape = {x.size(0), x.size(1),
                           (padded_h - options.kernel_size) / options.stride + 1,
                           (padded_w - options.kernel_size) / options.stride + 1};
  const MemoryFormat format = x.memory_format();
  const MemoryFormat compute = ops::kernel_format(x.device(), format);
  const Tensor cx = x.detach().contiguous(compute);
  Tensor out =
      empty(out_shape, {.dtype = x.dtype(), .device = x.device(), .memory_format = compute});
  Tensor workspace;
  backend_for(x.device()).max_pool2d_forward(cx, options, out, workspace);
  autograd::record("max_pool2d", {&x}, {&out},
                   [cx, y = out.detach(), workspace, options](const std::vector<Tensor>& grads,
                                                              const std::vector<bool>&) {
                     ops::check_same_dtype("max_pool2d backward", "input", cx, "gradient",
                                           grads[0]);
                     Tensor grad_x = empty_like(cx);
                     backend_for(cx.device())
                         .max_pool2d_backward(grads[0].contiguous(cx.memory_format()), cx, y,
                                              workspace, options, grad_x);
                     return std::vector<Tensor>{grad_x};
                   });
  return out.contiguous(format);  // a no-op unless the backend computed on a contiguous copy
}

Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w) {
  const profiler::RecordScope scope("adaptive_avg_pool2d");
  ops::check_float_activation("adaptive_avg_pool2d", "input", x);
  ops::check_dim("adaptive_avg_pool2d", "input", x, 4);
  TANDEM_CHECK(out_h >= 1 && out_w >= 1, "[adaptive_avg_pool2d] output size must be positive, got ",
               out_h, "x", out_w);
  TANDEM_CHECK(x.size(2) >= 1 && x.size(3) >= 1, "[adaptive_avg_pool2d] empty input ",
               shape_str(x.shape()));
  const MemoryFormat format = x.memory_format();
  const MemoryFormat compute = ops::kernel_format(x.device(), format);
  Tensor out = empty({x.size(0), x.size(1), out_h, out_w},
                     {.dtype = x.dtype(), .device = x.device(), .memory_format = compute});
  backend_for(x.device()).adaptive_avg_pool2d_forward(x.detach().contiguous(compute), out);
  autograd::record(
      "adaptive_avg_pool2d", {&x}, {&out},
      [input_shape = x.shape(), device = x.device(), dtype = x.dtype(), compute](
          const std::vector<Tensor>& grads, const std::vector<bool>&) {
        TANDEM_CHECK(grads[0].dtype() == dtype, "[adaptive_avg_pool2d backward] input is ",
                     dtype_name(dtype), " but gradient is ", dtype_name(grads[0].dtype()));
        Tensor grad_x =
            empty(input_shape, {.dtype = dtype, .device = device, .memory_format = compute});
        backend_for(device).adaptive_avg_pool2d_backward(grads[0].contiguous(compute), grad_x);
        return std::vector<Tensor>{grad_x};
      });
  return out.contiguous(format);
}

}  // namespace tandem
