"""Fashion-MNIST from Debian's dataset-fashion-mnist package, read with NumPy (nothing downloaded).

load(split, data_dir) returns the images of "train" (60k) or "t10k" (10k) as an (N, 1, 28, 28)
float32 tensor normalised with the training set's pixel mean and deviation, and the labels as
int64. The IDX files may be gzip'd (the package ships them so) or plain. SmallCNN is the model
that the demo trains and whose gradients bench/data holds.
"""

import gzip
import struct
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
# Training-set pixel mean and standard deviation (pixels in [0, 1]).
PIXEL_MEAN = 0.2860
PIXEL_STD = 0.3530
_UNSIGNED_BYTE = 0x08


def read_idx(path):
    """An unsigned-byte IDX file as a uint8 array shaped as its header says."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4:
        raise ValueError(f"{path}: too short for an IDX header ({len(data)} bytes)")
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != _UNSIGNED_BYTE:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (header {data[:4].hex()})")
    header_bytes = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", data[4:header_bytes])
    if len(data) - header_bytes != int(np.prod(shape)):
        body = len(data) - header_bytes
        raise ValueError(f"{path}: the header says {shape}, but {body} bytes follow")
    return np.frombuffer(data, dtype=np.uint8, offset=header_bytes).reshape(shape)


def _find(data_dir, stem):
    for name in (f"{stem}.gz", stem):
        if (data_dir / name).exists():
            return data_dir / name
    raise FileNotFoundError(
        f"{data_dir / stem}[.gz] not found: install the Debian package dataset-fashion-mnist "
        "or pass the directory of the IDX files"
    )


def load(split, data_dir=DEFAULT_DIR):
    """Images (N, 1, 28, 28) float32, normalised, and labels (N,) int64 of `split`."""
    data_dir = Path(data_dir)
    images = read_idx(_find(data_dir, f"{split}-images-idx3-ubyte"))
    labels = read_idx(_find(data_dir, f"{split}-labels-idx1-ubyte"))
    if len(images) != len(labels):
        raise ValueError(f"{data_dir}: {len(images)} {split} images but {len(labels)} labels")
    x = (images.astype(np.float32) / 255.0 - PIXEL_MEAN) / PIXEL_STD
    return torch.from_numpy(x[:, None]), torch.from_numpy(labels.astype(np.int64))


class SmallCNN(nn.Module):
    """conv(1->16,5x5)-relu-pool2, conv(16->32,5x5)-relu-pool2, fc(512->128)-relu, fc(128->10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))
