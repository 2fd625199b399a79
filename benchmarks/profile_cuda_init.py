"""Step-by-step cost of CUDA start-up in a fresh process (GPU machine diagnostics)."""
import time

t0 = time.time()
marks = []


def mark(name):
    marks.append((name, time.time() - t0))


import numpy as np  # noqa: E402

mark("import numpy")
import torch  # noqa: E402

mark("import torch")
torch.cuda.is_available()
mark("cuda.is_available")
torch.cuda.get_device_name(0)
mark("get_device_name")
a = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
mark("first tensor (context)")
x = torch.from_numpy(np.zeros((294912, 2), np.float32)).to("cuda")
torch.cuda.synchronize()
mark("2.4 MB to device")
o = torch.arange(200, device="cuda")
torch.cuda.synchronize()
mark("arange kernel")
w = x[(torch.arange(64, device="cuda")[:, None] + o)]
torch.cuda.synchronize()
mark("gather kernel")
rnn = torch.nn.GRU(2, 23, batch_first=True).cuda()
y, _ = rnn(w)
torch.cuda.synchronize()
mark("first cuDNN GRU forward")
y.sum().backward()
torch.cuda.synchronize()
mark("first backward")
opt = torch.optim.AdamW(rnn.parameters())
opt.step()
torch.cuda.synchronize()
mark("first AdamW step")
for n, t in marks:
    print(f"{n:28s} {t:7.3f} s")
