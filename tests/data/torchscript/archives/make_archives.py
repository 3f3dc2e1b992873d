"""Makes the archives tests/unit/test_tsarchive.c reads (server/tsarchive.c: is an upload TorchScript?).

    /usr/bin/python3 tests/data/torchscript/archives/make_archives.py

Run it from the repository root with the python3 that has torch (Debian 12's /usr/bin/python3, torch
1.13); it rewrites the files beside it.  They are committed, so the tests need no torch.  The bytes differ
from run to run (random weights), the structure does not:

  scripted.pt      torch.jit.script of a tiny module (a few KB): TorchScript, accepted
  state_dict.pt    torch.save(model.state_dict()): data.pkl without code/ or constants.pkl
  whole_module.pt  torch.save(model): the module pickled, not scripted
  truncated.pt     scripted.pt without its last 100 bytes (the end of central directory is gone)
  flipped.pt       scripted.pt with one byte of a stored entry (constants.pkl's data) changed: CRC mismatch
  text.pt          a plain text file
"""

import io
import os
import struct
import zipfile

import torch

here = os.path.dirname(os.path.abspath(__file__))


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return torch.relu(self.fc(x))


def write(name, data):
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)


def saved(obj, script=False):
    buf = io.BytesIO()
    if script:
        torch.jit.save(obj, buf)
    else:
        torch.save(obj, buf)
    return buf.getvalue()


def data_offset(archive, suffix):
    """Offset of the first byte of the (stored) entry whose name ends with suffix."""
    z = zipfile.ZipFile(io.BytesIO(archive))
    info = next(i for i in z.infolist() if i.filename.endswith(suffix))
    assert info.compress_type == zipfile.ZIP_STORED and info.file_size > 0, info
    name_len, extra_len = struct.unpack("<HH", archive[info.header_offset + 26 : info.header_offset + 30])
    return info.header_offset + 30 + name_len + extra_len


torch.manual_seed(0)
model = Tiny().eval()
scripted = saved(torch.jit.script(model), script=True)
write("scripted.pt", scripted)
write("state_dict.pt", saved(model.state_dict()))
write("whole_module.pt", saved(model))
write("truncated.pt", scripted[:-100])
flipped = bytearray(scripted)
flipped[data_offset(scripted, "/constants.pkl")] ^= 0x01
write("flipped.pt", bytes(flipped))
write("text.pt", b"this is not a model\n")
