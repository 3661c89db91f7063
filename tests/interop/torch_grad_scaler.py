"""PyTorch's GradScaler on a sequence of gradients, for tests/nn/grad_scaler_test.cpp.

    torch_grad_scaler.py CASE_FILE

CASE_FILE (written by the test, floats as C's %a hex text):
    init_scale growth_factor backoff_factor growth_interval lr momentum
    p0 p1 ...                       the parameter's initial values
    unscale_first g0 g1 ...         one line per step: the gradient backward left (scaled), and
                                    1 where unscale_() is called before step() (as before clipping)
Prints one line per step, floats as float.hex():
    found_inf scale growth_tracker p0 p1 ...     after step() and update()
or "skip: WHY" when PyTorch is missing.

The scaler is PyTorch's own torch.cuda.amp.GradScaler (its unscale_/step/update state machine,
run as it is), driving torch.optim.SGD. Three things stand in for CUDA, which Debian's torch 1.13
build lacks:
- GradScaler disables itself without CUDA, so amp_definitely_not_available is made to say no;
- its _MultiDeviceReplicator (which hands the scale to each gradient's device) asserts a CUDA
  tensor in its constructor, so a subclass constructs it without that assert;
- the two kernels it calls, _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_,
  have no CPU implementation before PyTorch 2.x; where they are missing, the Python functions
  below replace them, transcribed line by line from PyTorch's CPU kernels
  (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp), which follow its CUDA ones. Where the
  real CPU kernels exist they are used as they are.
found_inf is read from the scaler's per-optimizer state (a private field) to report skipped steps.
"""
import sys

try:
    import torch
    from torch.cuda.amp import grad_scaler
except ImportError as e:  # no PyTorch: the test skips
    print("skip: %s" % e)
    sys.exit(0)


def non_finite_check_and_unscale(grads, found_inf, inv_scale):
    # Per element: found_inf = 1 if not isfinite(val); val * inv_scale unless inv_scale == 1 (float32).
    for grad in grads:
        if not bool(torch.isfinite(grad).all()):
            found_inf.fill_(1.0)
        if inv_scale.item() != 1.0:
            grad.mul_(inv_scale)


def to_float32(value):
    return torch.tensor(value, dtype=torch.float64).float().item()


def update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    # The products in double (float * double), rounded to float when stored.
    if found_inf.item():
        scale.fill_(to_float32(scale.item() * backoff_factor))
        growth_tracker.fill_(0)
    else:
        successful = growth_tracker.item() + 1
        if successful == growth_interval:
            new_scale = to_float32(scale.item() * growth_factor)
            if torch.isfinite(torch.tensor(new_scale)):
                scale.fill_(new_scale)
            growth_tracker.fill_(0)
        else:
            growth_tracker.fill_(successful)
    return scale


class CpuReplicator(grad_scaler._MultiDeviceReplicator):
    def __init__(self, master_tensor):  # the constructor of 1.13's, without its CUDA assert
        self.master = master_tensor
        self._per_device_tensors = {}


def has_cpu_kernels():
    try:
        torch._amp_update_scale_(torch.ones(1), torch.zeros(1, dtype=torch.int32), torch.zeros(1),
                                 2.0, 0.5, 2)
        return True
    except (RuntimeError, NotImplementedError):
        return False


def read_case(path):
    with open(path) as f:
        lines = [line.split() for line in f if line.strip()]
    init_scale, growth_factor, backoff_factor, growth_interval, lr, momentum = lines[0]
    settings = dict(init_scale=float.fromhex(init_scale), growth_factor=float.fromhex(growth_factor),
                    backoff_factor=float.fromhex(backoff_factor),
                    growth_interval=int(growth_interval))
    params = [float.fromhex(v) for v in lines[1]]
    steps = [(line[0] == "1", [float.fromhex(v) for v in line[1:]]) for line in lines[2:]]
    return settings, float.fromhex(lr), float.fromhex(momentum), params, steps


def main():
    settings, lr, momentum, initial, steps = read_case(sys.argv[1])
    if not has_cpu_kernels():
        torch._amp_foreach_non_finite_check_and_unscale_ = non_finite_check_and_unscale
        torch._amp_update_scale_ = update_scale
    grad_scaler.amp_definitely_not_available = lambda: False
    grad_scaler._MultiDeviceReplicator = CpuReplicator
    param = torch.nn.Parameter(torch.tensor(initial, dtype=torch.float32))
    optimizer = torch.optim.SGD([param], lr=lr, momentum=momentum)
    scaler = grad_scaler.GradScaler(**settings)
    # scale() asserts a CUDA tensor; it would create the scale on the loss's device, here the CPU.
    scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
    out = []
    for unscale_first, grad in steps:
        param.grad = torch.tensor(grad, dtype=torch.float32)
        if unscale_first:
            scaler.unscale_(optimizer)
        state = scaler._per_optimizer_states[id(optimizer)]
        scaler.step(optimizer)
        found = sum(v.item() for v in state["found_inf_per_device"].values())
        scaler.update()
        values = [float(v).hex() for v in param.detach().tolist()]
        out.append(" ".join(["1" if found else "0", float(scaler.get_scale()).hex(),
                             str(scaler._growth_tracker.item())] + values))
    print("\n".join(out))


if __name__ == "__main__":
    main()
