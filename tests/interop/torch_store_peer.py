"""PyTorch's side of tests/parallel/comm/rendezvous/torch_store_test.cpp: hosts a TCPStore (in this PyTorch's
protocol version), prints its port and PyTorch's version, then trades keys with Tandem's TorchStore client:

  sets  counter += 5, then from_python = b"\\x00\\xffbytes", then python_done = b"1" (after from_tandem)
  reads from_tandem (waits for it) and prints it as hex, with the counter after Tandem's add
  exits once tandem_done is set, or after 60 s

Prints "no torch" and exits 0 where PyTorch is missing (the test skips).
"""
import datetime
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("no torch", flush=True)
    sys.exit(0)

timeout = datetime.timedelta(seconds=60)
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timeout)
print(store.port, torch.__version__, flush=True)
store.add("counter", 5)  # before from_python: the test reads the counter once that is there
store.set("from_python", b"\x00\xffbytes")
value = store.get("from_tandem")
print("from_tandem", value.hex(), "counter", int(store.get("counter")), flush=True)
store.set("python_done", b"1")
store.wait(["tandem_done"], timeout)
