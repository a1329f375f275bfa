"""Built-in small real models (a few-layer GPT, a small CNN) and loading a user's MODULE:FACTORY."""

from __future__ import annotations

import importlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from dataperf.errors import UserError


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Decoder-only transformer with learned positions and a tied output head."""

    input_kind = "tokens"

    def __init__(self, vocab: int = 32000, d: int = 256, layers: int = 4, heads: int = 4, max_len: int = 8192):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.vocab = vocab
        nn.init.normal_(self.tok.weight, std=1 / math.sqrt(d))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.T


class CNN(nn.Module):
    """A small ResNet-ish image classifier: strided conv stages, global pooling, a linear head."""

    input_kind = "image"

    def __init__(self, classes: int = 1000, width: int = 32):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for i in range(4):
            c = width * 2**i
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                       nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
            c_in = c
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean((2, 3)))


BUILTIN = {
    "gpt-small": lambda: GPT(),
    "gpt-tiny": lambda: GPT(d=64, layers=2, heads=2, vocab=32000),
    "gpt-medium": lambda: GPT(d=1024, layers=12, heads=16, vocab=32000, max_len=2048),
    # ~1.3B parameters (GPT-3 XL shape): where optimizer state (16 bytes/param under AdamW) dominates memory
    "gpt-1.3b": lambda: GPT(d=2048, layers=24, heads=16, vocab=50304, max_len=2048),
    "cnn-small": lambda: CNN(),
}


def load_model(spec: str) -> nn.Module:
    """A built-in name, or MODULE:FACTORY where FACTORY() returns an nn.Module."""
    if spec in BUILTIN:
        return BUILTIN[spec]()
    if ":" not in spec:
        raise UserError(f"unknown model {spec!r}; choose {', '.join(BUILTIN)} or give MODULE:FACTORY")
    mod_name, _, fn_name = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:
        raise UserError(f"cannot import module {mod_name!r} for --model {spec}: {type(e).__name__}: {e}"
                        f"{_import_fix(e)}") from None
    fn = getattr(mod, fn_name, None)
    if fn is None or not callable(fn):
        raise UserError(f"module {mod_name!r} has no callable {fn_name!r} (for --model {spec})")
    try:
        model = fn()
    except Exception as e:
        raise UserError(f"model factory {spec} failed: {type(e).__name__}: {e}") from None
    if not isinstance(model, nn.Module):
        raise UserError(f"model factory {spec} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _import_fix(e: Exception) -> str:
    """What to do when a --model module does not import: the README's torchvision example on a CPU install has
    no torchvision, or PyPI's, built for another torch (`operator torchvision::nms does not exist`)."""
    other_build = isinstance(e, RuntimeError) and "torchvision::" in str(e)
    why = (f" (this torchvision was built for another torch than {torch.__version__}: install the torchvision "
           "release made for it)") if other_build else ""
    return (f"{why}; or measure a model that imports here: a built-in (--model cnn-small for images, "
            "--model gpt-small for tokens) or your own MODULE:FACTORY returning a torch.nn.Module")


def input_kind(model: nn.Module, default: str = "tokens") -> str:
    return getattr(model, "input_kind", default)


def loss_of(out: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """A real training loss for any of our shapes: next-token CE, class CE, or a scalar the model gave."""
    if out.dim() == 0:
        return out
    if out.dim() == 3 and x.dim() == 2 and out.shape[:2] == x.shape:
        return F.cross_entropy(out[:, :-1].reshape(-1, out.shape[-1]).float(), x[:, 1:].reshape(-1))
    if out.dim() == 2 and out.shape[0] == y.shape[0]:
        return F.cross_entropy(out.float(), y % out.shape[1])
    return out.float().pow(2).mean()
