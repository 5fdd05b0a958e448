#!/usr/bin/python3
"""Exports the model zoo as TorchScript files.

Run with Debian's interpreter (python3-torch, python3-torchvision):

    /usr/bin/python3 models/export.py --out build/models [--only resnet50,toy]

Each model is written as NAME.script.pt (torch.jit.script) and, where tracing
gives the same program, NAME.trace.pt (torch.jit.trace). Every file carries
its input spec as the TorchScript extra file `mp_input_spec.json`, so
`mpplan model.pt` needs no --input for bundled models:

    {"inputs": [{"name": "x", "dtype": "float32", "shape": [120, 3, 128, 128],
                 "batch_dim": 0}]}

Integer inputs also carry "range": [low, high) for the values they accept.
Weights are random but seeded, so the same command writes the same files.
"""
import argparse
import json
import math
import os
import sys
import warnings
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

SPEC_FILE = "mp_input_spec.json"


# --- the tutorial's models (../shared/seeds) ----------------------------------

class Toy(nn.Module):
    """The tutorial's ToyModel: Linear 10->10, ReLU, Linear 10->5."""

    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


class ConvNet(nn.Module):
    """The 4-block CIFAR ConvNet the tutorial write-up split over 4 GPUs."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, 6, kernel_size=5), nn.ReLU(),
                                   nn.MaxPool2d(kernel_size=2))
        self.conv2 = nn.Sequential(nn.Conv2d(6, 16, kernel_size=5), nn.ReLU(),
                                   nn.MaxPool2d(kernel_size=2))
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
                                nn.Linear(120, 84), nn.ReLU())
        self.out = nn.Sequential(nn.Linear(84, num_classes), nn.Softmax(dim=1))

    def forward(self, x):
        return self.out(self.fc(self.conv2(self.conv1(x))))


def resnet50():
    import torchvision
    return torchvision.models.resnet50(num_classes=1000)


# --- pipeline benchmark models ------------------------------------------------

class Block(nn.Module):
    """Pre-norm decoder block: causal self-attention then an MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    """A small decoder-only transformer on int64 tokens."""

    def __init__(self, vocab: int = 1024, dim: int = 128, heads: int = 4,
                 layers: int = 8, context: int = 64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        return self.head(self.ln(self.blocks(x)))


class MLP(nn.Module):
    """A deep MLP of identical blocks: the evenly balanced pipeline case."""

    def __init__(self, width: int = 512, depth: int = 16):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU())
                                      for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


class Inception(nn.Module):
    """Four parallel branches joined by a concatenation."""

    def __init__(self, cin: int, c: int):
        super().__init__()
        self.b1 = nn.Conv2d(cin, c, 1)
        self.b3 = nn.Sequential(nn.Conv2d(cin, c, 1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))
        self.b5 = nn.Sequential(nn.Conv2d(cin, c, 1), nn.ReLU(), nn.Conv2d(c, c, 5, padding=2))
        self.pool = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), nn.Conv2d(cin, c, 1))

    def forward(self, x):
        return torch.relu(torch.cat([self.b1(x), self.b3(x), self.b5(x), self.pool(x)], 1))


class Branchy(nn.Module):
    """U-Net shaped DAG: Inception blocks on the way down, long skip
    connections concatenated on the way up."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.down1 = Inception(16, 8)      # 32 channels, 64x64
        self.down2 = Inception(32, 16)     # 64 channels, 32x32
        self.bottom = Inception(64, 16)    # 64 channels, 16x16
        self.up2 = nn.Conv2d(64 + 64, 32, 3, padding=1)
        self.up1 = nn.Conv2d(32 + 32, 16, 3, padding=1)
        self.head = nn.Conv2d(16 + 16, 2, 1)

    def forward(self, x):
        s = torch.relu(self.stem(x))
        d1 = self.down1(s)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = torch.relu(self.up2(torch.cat([F.interpolate(b, scale_factor=2.0), d2], 1)))
        u1 = torch.relu(self.up1(torch.cat([F.interpolate(u2, scale_factor=2.0), d1], 1)))
        return self.head(torch.cat([u1, s], 1))


# --- small models that test the graph layer -------------------------------------

class InPlace(nn.Module):
    """An in-place op on a value that other nodes read before and after it:
    `a` is read by fc2 (old contents), mutated by relu_, then read again."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 16)

    def forward(self, x):
        a = self.fc1(x)
        b = self.fc2(a)
        a.relu_()
        c = self.fc3(a)
        a.add_(b)
        return a * c + b


class InputWrite(nn.Module):
    """Writes into its own input first, as some hand-written models do
    (`x.add_(shift)`, a learned shift), and reads it again at the end."""

    def __init__(self):
        super().__init__()
        self.shift = nn.Parameter(torch.randn(16) * 0.1)
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        x.add_(self.shift)
        h = torch.relu(self.fc2(torch.relu(self.fc1(x))))
        return self.head(h + x)


class Recurrent(nn.Module):
    """nn.LSTM (weights in a list attribute) with several inputs and a
    nested tuple output."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x, h0, c0) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        y, (h, c) = self.lstm(torch.tanh(self.embed(x)), (h0, c0))
        return self.head(y), (h, c)


class Styled(nn.Module):
    """Written in a personal style: the module argument named `s`, not
    `self` (legal Python), a helper method, a ModuleList walked in a loop."""

    def __init__(s, width: int = 64, depth: int = 3):
        super().__init__()
        s.inp = nn.Linear(32, width)
        s.hidden = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        s.head = nn.Linear(width, 10)

    def mix(s, h, skip):
        return F.gelu(h) + skip

    def forward(s, x):
        h = s.inp(x)
        for layer in s.hidden:
            h = s.mix(layer(h), h)
        return s.head(h)


# --- models with dropout: randomness mpexec must reproduce --------------------

class Bert(nn.Module):
    """A BERT-style encoder built from PyTorch's own nn.TransformerEncoder
    (whose scripted forward branches on a fast path and returns early):
    token and position embeddings, dropout in the embeddings, attention and
    MLP, a padding mask from an int64 attention mask (1 = token, 0 = pad,
    the first token never padded), and a pooled classification head."""

    def __init__(self, vocab: int = 512, dim: int = 64, heads: int = 4, layers: int = 3,
                 context: int = 32, classes: int = 4):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.norm = nn.LayerNorm(dim)
        self.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.pool = nn.Linear(dim, dim)
        self.classify = nn.Linear(dim, classes)

    def forward(self, ids, mask):
        positions = torch.arange(ids.size(1), device=ids.device)
        x = self.drop(self.norm(self.tok(ids) + self.pos(positions)))
        pad = (mask == 0) & (positions > 0)
        h = self.encoder(x, src_key_padding_mask=pad)
        return self.classify(self.drop(torch.tanh(self.pool(h[:, 0]))))


class Gpt2Block(nn.Module):
    def __init__(self, dim: int, heads: int, p: float):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        self.attn_drop = nn.Dropout(p)
        self.resid_drop = nn.Dropout(p)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = self.attn_drop(att.masked_fill(~causal, float("-inf")).softmax(-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.resid_drop(self.proj(y))
        return x + self.resid_drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class Gpt2(nn.Module):
    """A GPT-2 style decoder: dropout on the embeddings, the attention
    weights and each residual branch, and the output projection tied to the
    token embedding (one tensor under two names, read by the first stage and
    the last)."""

    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 4,
                 context: int = 32, p: float = 0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.drop = nn.Dropout(p)
        self.blocks = nn.Sequential(*[Gpt2Block(dim, heads, p) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        return self.head(self.ln(self.blocks(x)))


def mobilenet():
    """torchvision's MobileNetV3-Small (dropout before its last layer,
    hardswish, squeeze-excitation), at 10 classes for a small input."""
    from torchvision.models import mobilenet_v3_small
    return mobilenet_v3_small(num_classes=10)


def spec(name, dtype, shape, batch_dim=0, value_range=None):
    s = {"name": name, "dtype": dtype, "shape": list(shape), "batch_dim": batch_dim}
    if value_range is not None:
        s["range"] = list(value_range)
    return s


# name -> (constructor, input specs, variants)
ZOO = {
    "toy": (Toy, [spec("x", "float32", [20, 10])], ("script", "trace")),
    "convnet": (ConvNet, [spec("x", "float32", [64, 3, 32, 32])], ("script", "trace")),
    "resnet50": (resnet50, [spec("x", "float32", [120, 3, 128, 128])], ("script", "trace")),
    "gpt": (GPT, [spec("idx", "int64", [8, 64], value_range=(0, 1024))], ("script", "trace")),
    "mlp": (MLP, [spec("x", "float32", [64, 512])], ("script", "trace")),
    "branchy": (Branchy, [spec("x", "float32", [4, 3, 64, 64])], ("script", "trace")),
    "inplace": (InPlace, [spec("x", "float32", [8, 16])], ("script", "trace")),
    "lstm": (Recurrent, [spec("x", "float32", [4, 12, 8]), spec("h0", "float32", [2, 4, 32], 1),
                         spec("c0", "float32", [2, 4, 32], 1)], ("script", "trace")),
    # Traced only, as the model it stands for was; its scripted graph has the same add_.
    "inputwrite": (InputWrite, [spec("x", "float32", [8, 16])], ("trace",)),
    # Scripted only: tracing renames the module argument to `self`.
    "styled": (Styled, [spec("x", "float32", [16, 32])], ("script",)),
    # Dropout models, scripted only: tracing in eval mode bakes dropout off.
    "bert": (Bert, [spec("ids", "int64", [8, 32], value_range=(0, 512)),
                    spec("mask", "int64", [8, 32], value_range=(0, 2))], ("script",)),
    "gpt2": (Gpt2, [spec("idx", "int64", [8, 32], value_range=(0, 256))], ("script",)),
    "mobilenet": (mobilenet, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
}

class WordLM(nn.Module):
    """pytorch/examples' word_language_model as its README trains it
    (RNNModel('LSTM', ...): 200 wide, 2 layers, dropout 0.2 around the LSTM
    and inside it between layers, tied encoder and decoder weights), written
    as that example is: sequence first, the batch in dim 1. A smaller
    vocabulary (its Wikitext-2 has 33,278 words), and no final view(-1,
    ntoken): a view across sequence and batch has no batch dim to split.
    Its forward takes the LSTM's state as the example does, one tuple
    `hidden`: the spec gives it as two tensors."""

    def __init__(self, ntoken: int = 2000, ninp: int = 200, nhid: int = 200, nlayers: int = 2,
                 dropout: float = 0.2):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight  # --tied
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input, hidden: Tuple[torch.Tensor, torch.Tensor]
                ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        return F.log_softmax(decoded, dim=-1), hidden


def mobilenet_v2():
    from torchvision.models import mobilenet_v2 as make
    return make(num_classes=10)


def resnet18():
    from torchvision.models import resnet18 as make
    return make(num_classes=10)


def shufflenet():
    from torchvision.models import shufflenet_v2_x0_5 as make
    return make(num_classes=10)


def squeezenet():
    from torchvision.models import squeezenet1_1 as make
    return make(num_classes=10)


def finetune():
    """Feature extraction as PyTorch's fine-tuning tutorial does it:
    torchvision's SqueezeNet 1.1 with every parameter frozen
    (requires_grad_(False)) and its last convolution replaced by a new,
    trained one for 10 classes: in training no gradient reaches the
    features, and only the new layer has one (its dropout still draws)."""
    from torchvision.models import squeezenet1_1 as make
    model = make(num_classes=1000)
    for p in model.parameters():
        p.requires_grad_(False)
    model.classifier[1] = nn.Conv2d(512, 10, kernel_size=1)
    model.num_classes = 10
    return model


def vit():
    """torchvision's VisionTransformer at a small size: patches by a strided
    convolution, a learned class token expanded over the batch and
    concatenated, a learned position embedding, torchvision's encoder blocks
    over nn.MultiheadAttention, dropout in the embeddings, attention and MLP."""
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=4, num_heads=4, hidden_dim=64, mlp_dim=128,
                             num_classes=10, dropout=0.1, attention_dropout=0.1)


def convnext():
    """torchvision's ConvNeXt at a fifth of ConvNeXt-T's widths, two blocks a
    stage: depthwise 7x7 convolutions, permutes to channels-last and back
    around LayerNorm, a learned layer scale, and stochastic depth (a
    Bernoulli draw per sample of each residual branch)."""
    from torchvision.models.convnext import ConvNeXt, CNBlockConfig
    widths = [(24, 48), (48, 96), (96, 192), (192, None)]
    return ConvNeXt([CNBlockConfig(i, o, 2) for i, o in widths], stochastic_depth_prob=0.2, num_classes=10)


def swin():
    """torchvision's Swin Transformer at a small size: windowed attention over
    4x4 windows shifted by torch.roll every second block, a relative position
    bias gathered from a learned table, patch merging by strided slices
    concatenated, stochastic depth."""
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                           stochastic_depth_prob=0.1, num_classes=10)


def r3d():
    """torchvision's video ResNet (R3D) with one block a stage: 3D
    convolutions over (time, height, width) and BatchNorm3d, a clip of 4
    frames."""
    from torchvision.models.video.resnet import VideoResNet, BasicBlock, Conv3DSimple, BasicStem
    return VideoResNet(block=BasicBlock, conv_makers=[Conv3DSimple] * 4, layers=[1, 1, 1, 1], stem=BasicStem,
                       num_classes=10)


def googlenet():
    """torchvision's GoogLeNet (Inception v1) with its two auxiliary
    classifiers: scripted, forward returns the NamedTuple GoogLeNetOutputs
    whose auxiliary logits are Optional[Tensor], tensors in training and
    None in inference; four-branch blocks concatenated, max pools with
    ceil_mode, dropout before each head."""
    from torchvision.models import GoogLeNet
    return GoogLeNet(num_classes=10, aux_logits=True, init_weights=True)


def lraspp():
    """torchvision's LR-ASPP segmentation head on a dilated MobileNetV3-Small
    (the large backbone is LR-ASPP's default; 4 MB instead of 13), 5
    classes: forward returns Dict[str, Tensor] ({"out": per-pixel logits
    at the input's size}), and its IntermediateLayerGetter fills an
    OrderedDict with backbone features layer by layer (aten::_set_item)."""
    from torchvision.models import mobilenet_v3_small
    from torchvision.models.segmentation.lraspp import _lraspp_mobilenetv3
    return _lraspp_mobilenetv3(mobilenet_v3_small(dilated=True), num_classes=5)


class Centred(nn.Module):
    """A running mean kept by hand in a buffer, as users write them: forward
    centres a layer's output on it, updates it in place in training (a
    chain, mean.mul_(0.9).add_(...)), and adds it to the output again, so
    each micro-batch reads what the one before wrote."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)
        self.c = nn.Linear(d, d)
        self.register_buffer("mean", torch.zeros(d))

    def forward(self, x):
        y = self.b(torch.tanh(self.a(x)) - self.mean)
        if self.training:
            self.mean.mul_(0.9).add_(y.mean(0).detach() * 0.1)
        return self.c(torch.relu(y)) + self.mean


class Distill(nn.Module):
    """Knowledge distillation in one forward, as users write it: a teacher
    under `with torch.no_grad():` gives soft targets (frozen: no gradient
    reaches its weights), a second no_grad block keeps the samples the
    teacher is sure of, and the student trains. Returns the student's
    logits and the masked KL term per sample."""

    def __init__(self):
        super().__init__()
        self.teacher = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        self.student = nn.Sequential(nn.Linear(32, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 10))

    def forward(self, x):
        with torch.no_grad():
            soft = torch.softmax(self.teacher(x) / 2.0, dim=-1)
        logits = self.student(x)
        with torch.no_grad():
            sure = (soft.max(-1)[0] > 0.12).to(x.dtype)
        kl = (soft * (torch.log(soft) - torch.log_softmax(logits / 2.0, dim=-1))).sum(-1)
        return logits, kl * sure


class MeanTeacher(nn.Module):
    """A mean teacher (Tarvainen and Valpola 2017): in training, forward
    first moves the teacher's weights towards the student's in place under
    torch.no_grad() (an exponential moving average, as the paper's and
    BYOL's code do), then runs both; the teacher's output is a target."""

    def __init__(self):
        super().__init__()
        self.student = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)
        self.teacher = nn.Linear(16, 16)

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                self.teacher.weight.mul_(0.9).add_(self.student.weight, alpha=0.1)
                self.teacher.bias.mul_(0.9).add_(self.student.bias, alpha=0.1)
        h = torch.relu(self.student(x))
        with torch.no_grad():
            target = torch.relu(self.teacher(x))
        return self.head(h), (h - target).pow(2).mean(-1)


class BertStyle(nn.Module):
    """A text classifier with Hugging Face's forward signature: input_ids,
    then `attention_mask` and `token_type_ids` as Optional[Tensor] = None
    (a mask of ones and type 0 when left out), and a float `temperature`
    with a default; the mask becomes an additive bias on the attention
    scores, the pooled first token a 3-way logit."""

    def __init__(self, vocab: int = 400, width: int = 64, layers: int = 2):
        super().__init__()
        self.words = nn.Embedding(vocab, width)
        self.types = nn.Embedding(2, width)
        self.positions = nn.Parameter(torch.randn(1, 64, width) * 0.02)
        self.norm = nn.LayerNorm(width)
        self.blocks = nn.ModuleList([nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.1, batch_first=True)
                                     for _ in range(layers)])
        self.pool = nn.Linear(width, width)
        self.classifier = nn.Linear(width, 3)

    def forward(self, input_ids, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, temperature: float = 1.0):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        n = input_ids.size(1)
        h = self.norm(self.words(input_ids) + self.types(token_type_ids) + self.positions[:, :n])
        padding = attention_mask == 0
        for block in self.blocks:
            h = block(h, src_key_padding_mask=padding)
        return self.classifier(torch.tanh(self.pool(h[:, 0]))) / temperature


class PackedTagger(nn.Module):
    """An LSTM classifier over padded batches as NLP users write one: the
    true lengths come in beside the token ids, pack_padded_sequence with
    enforce_sorted=False (a sort, and a scatter into a fresh index tensor
    inside an if), the last hidden state classified."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.lstm = nn.LSTM(16, 24, batch_first=True)
        self.head = nn.Linear(24, 4)

    def forward(self, ids, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(ids), lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return self.head(h[-1])


class SharedLayers(nn.Module):
    """ALBERT's cross-layer sharing: one nn.TransformerEncoderLayer applied
    `depth` times in a for loop over a range, then a mean-pooled head."""

    def __init__(self, depth: int = 6):
        super().__init__()
        self.depth = depth
        self.embed = nn.Embedding(300, 64)
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True)
        self.head = nn.Linear(64, 5)

    def forward(self, ids):
        h = self.embed(ids)
        for _ in range(self.depth):
            h = self.layer(h)
        return self.head(h.mean(1))


def gpt_bf16():
    """The zoo's GPT at half its widths and depth with every parameter in
    bfloat16, as a user who halves a model's memory casts it
    (model.to(torch.bfloat16)): bfloat16 activations, outputs and gradients
    end to end, a float32 loss only."""
    return GPT(vocab=256, dim=64, heads=4, layers=4, context=32).to(torch.bfloat16)


class Seq2Seq(nn.Module):
    """PyTorch's own nn.Transformer, encoder and decoder (2 layers each,
    batch first, dropout 0.1) between two embeddings and a head: the
    encoder's output is read by every decoder layer's cross-attention, a
    value live across every cut after the encoder; a causal mask built in
    the forward from the target's length."""

    def __init__(self, vocab: int = 300, width: int = 64):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, width)
        self.tgt_embed = nn.Embedding(vocab, width)
        self.transformer = nn.Transformer(d_model=width, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                                          dim_feedforward=2 * width, dropout=0.1, batch_first=True)
        self.head = nn.Linear(width, vocab)

    def forward(self, src, tgt):
        n = tgt.size(1)
        causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        return self.head(self.transformer(self.src_embed(src), self.tgt_embed(tgt), tgt_mask=causal))


class GruTagger(nn.Module):
    """A sequence tagger: embedding, a 2-layer bidirectional nn.GRU with
    dropout between its layers, a Conv1d over time (transposes around it),
    a linear head per position."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(500, 32)
        self.gru = nn.GRU(32, 48, num_layers=2, batch_first=True, dropout=0.2, bidirectional=True)
        self.conv = nn.Conv1d(96, 64, 3, padding=1)
        self.head = nn.Linear(64, 8)

    def forward(self, x):
        h, _ = self.gru(self.embed(x))
        h = torch.relu(self.conv(h.transpose(1, 2))).transpose(1, 2)
        return self.head(h)


class TopTwoMoE(nn.Module):
    """A mixture of experts over tokens, top-2 routing: a softmax gate,
    topk, and per expert the rows routed to it taken with index_select
    (rows found by nonzero, a data-dependent count) and added back with
    index_add, weighted by the gate."""

    def __init__(self, d: int = 32, experts: int = 4, hidden: int = 64):
        super().__init__()
        self.inp = nn.Linear(16, d)
        self.gate = nn.Linear(d, experts)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))
                                      for _ in range(experts)])
        self.out = nn.Linear(d, 5)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.inp(x).reshape(b * t, -1)
        weights, chosen = torch.topk(torch.softmax(self.gate(h), dim=-1), 2, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        y = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            mask = chosen == e
            rows = mask.any(-1).nonzero().squeeze(-1)
            w = (weights * mask.to(weights.dtype)).sum(-1).index_select(0, rows).unsqueeze(-1)
            y = y.index_add(0, rows, expert(h.index_select(0, rows)) * w)
        return self.out((h + y).reshape(b, t, -1)).mean(1)


class VQBottleneck(nn.Module):
    """An autoencoder with a vector-quantised bottleneck: the nearest
    codebook row by argmin, the straight-through estimator z + (q - z).detach(),
    and beside the reconstruction a commitment loss, a mean over the batch
    (an output no dimension of which grows with the batch)."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 8))
        self.codebook = nn.Parameter(torch.randn(16, 8))
        self.dec = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 20))

    def forward(self, x):
        z = self.enc(x)
        distance = (z.unsqueeze(1) - self.codebook.unsqueeze(0)).pow(2).sum(-1)
        q = self.codebook.index_select(0, distance.argmin(-1))
        return self.dec(z + (q - z).detach()), (q - z.detach()).pow(2).mean()


class LoraLinear(nn.Module):
    """A linear layer with LoRA's low-rank update, as PEFT adds it: the base
    weight frozen, x -> base(x) + B(A(dropout(x))) * alpha / r with A and B
    trained. B starts small rather than at PEFT's zero, as after a few
    steps, so that A takes a gradient from the first."""

    def __init__(self, d_in: int, d_out: int, r: int = 4, alpha: float = 8.0):
        super().__init__()
        self.base = nn.Linear(d_in, d_out)
        self.base.requires_grad_(False)
        self.lora_a = nn.Linear(d_in, r, bias=False)
        self.lora_b = nn.Linear(r, d_out, bias=False)
        nn.init.normal_(self.lora_b.weight, std=0.02)
        self.dropout = nn.Dropout(0.1)
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(self.dropout(x))) * self.scale


class LoraBlock(nn.Module):
    """A pre-norm decoder block whose query and value projections carry LoRA
    (PEFT's default target modules); the rest frozen."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.q = LoraLinear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = LoraLinear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, c = x.shape
        h = self.ln1(x)
        q = self.q(h).view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = self.k(h).view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = self.v(h).view(b, t, self.heads, c // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        x = x + self.o((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class LoraGpt(nn.Module):
    """A GPT fine-tuned with LoRA: every pre-trained weight frozen (the
    embeddings, the blocks, the head), only the adapters trained."""

    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 4, context: int = 32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList([LoraBlock(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        for name, p in self.named_parameters():
            p.requires_grad_("lora_" in name)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class NanoGpt(nn.Module):
    """A GPT in nanoGPT's style: forward(idx, targets=None) returns the
    logits and, given targets, the loss it computes itself (cross-entropy
    over every position, a mean), else None; the head tied to the token
    embedding. mpexec --loss output trains on that loss."""

    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 4, context: int = 32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight
        for module in self.modules():  # nanoGPT's initialisation: an untrained loss of about ln(vocab)
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, idx, targets: Optional[torch.Tensor] = None):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        loss: Optional[torch.Tensor] = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


class HfClassifier(nn.Module):
    """A sequence classifier in Hugging Face's style: forward(input_ids,
    labels=None) returns a dict whose "loss" comes first when labels are
    given, then "logits" (return_dict=True as a Dict[str, Tensor])."""

    def __init__(self, vocab: int = 100, dim: int = 32, classes: int = 5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.dense = nn.Linear(dim, dim)
        self.hidden = nn.Linear(dim, dim)
        self.classifier = nn.Linear(dim, classes)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, input_ids, labels: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        h = torch.tanh(self.dense(self.embed(input_ids).mean(1)))
        logits = self.classifier(torch.tanh(self.hidden(h)))
        out: Dict[str, torch.Tensor] = {}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels)
        out["logits"] = logits
        return out


class SummedRegression(nn.Module):
    """A regression in least-squares style: forward(x, target) returns the
    prediction and half the squared error summed over the batch (what
    reduction="sum" gives), not its mean."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, width), nn.GELU(), nn.Linear(width, width), nn.GELU())
        self.out = nn.Linear(width, 4)

    def forward(self, x, target):
        y = self.out(self.body(x))
        return y, 0.5 * ((y - target) ** 2).sum()


class ReachAttention(nn.Module):
    """Causal self-attention written out: one qkv projection, one out."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        return self.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c))


class ReachBlock(nn.Module):
    """A block with no forward of its own: the model's forward calls its parts."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = ReachAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))


class RootReach(nn.Module):
    """A GPT in one forward that reaches into its blocks, as personal
    training scripts do (`for blk in self.blocks: x = x + blk.attn(blk.ln1(x))`):
    every module call is two or three attributes away from the root."""

    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 3, context: int = 32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, context, dim) * 0.02)
        self.blocks = nn.ModuleList([ReachBlock(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, :idx.size(1)]
        for blk in self.blocks:
            x = x + blk.attn(blk.ln1(x))
            x = x + blk.mlp(blk.ln2(x))
        return self.head(self.ln(x))


class ConformerConv(nn.Module):
    """Conformer's convolution module: pointwise conv to 2x with GLU, a depthwise
    conv, BatchNorm1d, SiLU, pointwise back, a residual."""

    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, 7, padding=3, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)
        self.drop = nn.Dropout(0.1)
    def forward(self, x):
        y = self.ln(x).transpose(1, 2)
        y = F.glu(self.pw1(y), dim=1)
        y = F.silu(self.bn(self.dw(y)))
        return x + self.drop(self.pw2(y).transpose(1, 2))

class HalfStepFeedForward(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Dropout(0.1), nn.Linear(4 * d, d), nn.Dropout(0.1))
    def forward(self, x):
        return x + 0.5 * self.net(x)

class ConformerBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff1 = HalfStepFeedForward(d); self.ff2 = HalfStepFeedForward(d)
        self.ln_att = nn.LayerNorm(d)
        self.att = nn.MultiheadAttention(d, 4, dropout=0.1, batch_first=True)
        self.conv = ConformerConv(d)
        self.ln = nn.LayerNorm(d)
    def forward(self, x, pad: Optional[Tensor] = None):
        x = self.ff1(x)
        h = self.ln_att(x)
        x = x + self.att(h, h, h, key_padding_mask=pad, need_weights=False)[0]
        x = self.conv(x)
        return self.ln(self.ff2(x))

class Conformer(nn.Module):
    """Conformer (Gulati et al. 2020): feature subsampling by two strided 2-D convs, then
    macaron blocks (half-step FFNs around attention and a depthwise conv module with GLU,
    BatchNorm1d and SiLU), CTC-style log-softmax over a vocabulary."""
    def __init__(self, feats=40, d=64, blocks=4, vocab=32):
        super().__init__()
        self.sub = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2), nn.ReLU())
        self.proj = nn.Linear(d * (((feats - 1) // 2 - 1) // 2), d)
        self.blocks = nn.ModuleList([ConformerBlock(d) for _ in range(blocks)])
        self.out = nn.Linear(d, vocab)
    def forward(self, feats):
        x = self.sub(feats.unsqueeze(1))          # b, d, t', f'
        b, c, t, f = x.shape
        x = self.proj(x.permute(0, 2, 1, 3).reshape(b, t, c * f))
        for blk in self.blocks:
            x = blk(x)
        return self.out(x).log_softmax(-1)

class Dlrm(nn.Module):
    """DLRM-style recommender: a bottom MLP over dense features, EmbeddingBag sums over
    multi-hot sparse features (fixed bag size: indices [B, bag] per table), pairwise dot
    interactions taken from the upper triangle, a top MLP to a click logit."""
    def __init__(self, dense=13, tables=4, rows=1000, d=16):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, d), nn.ReLU())
        self.embs = nn.ModuleList([nn.EmbeddingBag(rows, d, mode="sum") for _ in range(tables)])
        n = tables + 1
        self.n = n
        self.top = nn.Sequential(nn.Linear(d + n * (n - 1) // 2, 64), nn.ReLU(), nn.Linear(64, 1))
    def forward(self, dense, sparse):
        x = self.bottom(dense)
        feats = [x]
        for i, emb in enumerate(self.embs):
            feats.append(emb(sparse[:, i, :]))
        t = torch.stack(feats, 1)                  # b, n, d
        z = torch.bmm(t, t.transpose(1, 2))
        iu = torch.triu_indices(self.n, self.n, 1)
        inter = z[:, iu[0], iu[1]]
        return self.top(torch.cat([x, inter], 1))

class SimClr(nn.Module):
    """SimCLR's encoder and projection head (Chen et al. 2020): Linear,
    BatchNorm1d, ReLU, Linear after global pooling. In training, BatchNorm1d
    refuses a batch of one sample: the model fails at micro-batches of 1."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projection = nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 16))

    def forward(self, x):
        return self.projection(self.encoder(x))

class WaveNetStack(nn.Module):
    """WaveNet-style stack: causal dilated conv1d by left padding (F.pad), gated tanh*sigmoid
    units, residual and skip 1x1 convs summed over layers, written with a helper function
    and the skips accumulated in a list."""
    def __init__(self, ch=32, layers=8, classes=64):
        super().__init__()
        self.inp = nn.Conv1d(1, ch, 1)
        self.dil = nn.ModuleList([nn.Conv1d(ch, 2 * ch, 2, dilation=2 ** (i % 4)) for i in range(layers)])
        self.res = nn.ModuleList([nn.Conv1d(ch, ch, 1) for _ in range(layers)])
        self.skip = nn.ModuleList([nn.Conv1d(ch, ch, 1) for _ in range(layers)])
        self.dils = [2 ** (i % 4) for i in range(layers)]
        self.head = nn.Sequential(nn.ReLU(), nn.Conv1d(ch, ch, 1), nn.ReLU(), nn.Conv1d(ch, classes, 1))
    def forward(self, wav):
        x = self.inp(wav)
        skips: List[Tensor] = []
        i = 0
        for conv, res, skip in zip(self.dil, self.res, self.skip):
            y = conv(F.pad(x, [self.dils[i], 0]))
            a, g = y.chunk(2, 1)
            z = torch.tanh(a) * torch.sigmoid(g)
            skips.append(skip(z))
            x = x + res(z)
            i += 1
        return self.head(torch.stack(skips).sum(0))


class TimeSequence(nn.Module):
    """pytorch/examples' time sequence prediction: two nn.LSTMCell stepped
    over the input's columns (`input.split(1, dim=1)`), the states made with
    torch.zeros in forward, each step's prediction appended to a list and
    concatenated. The loop is one node whose only inputs needing a gradient
    are the cells' weights."""

    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input):
        outputs: List[Tensor] = []
        h_t = torch.zeros(input.size(0), 51, dtype=input.dtype)
        c_t = torch.zeros(input.size(0), 51, dtype=input.dtype)
        h_t2 = torch.zeros(input.size(0), 51, dtype=input.dtype)
        c_t2 = torch.zeros(input.size(0), 51, dtype=input.dtype)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            outputs.append(self.linear(h_t2))
        return torch.cat(outputs, dim=1)


class Vae(nn.Module):
    """pytorch/examples' VAE: the reparameterisation draws torch.randn_like
    in forward; three outputs (the reconstruction, mu, logvar)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar


class DcganGenerator(nn.Module):
    """pytorch/examples' DCGAN generator at half its width: transposed
    convolutions from a 1x1 noise input, BatchNorm, ReLU(True), tanh."""

    def __init__(self, nz: int = 100, ngf: int = 32, nc: int = 3):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class StyleResidual(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.conv1 = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(ch, ch, 3))
        self.in1 = nn.InstanceNorm2d(ch, affine=True)
        self.conv2 = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(ch, ch, 3))
        self.in2 = nn.InstanceNorm2d(ch, affine=True)

    def forward(self, x):
        residual = x
        out = F.relu(self.in1(self.conv1(x)))
        return self.in2(self.conv2(out)) + residual


class FastNeuralStyle(nn.Module):
    """pytorch/examples' fast neural style TransformerNet at a quarter of
    its widths: reflection padding, InstanceNorm2d with affine weights,
    residual blocks, upsampling by F.interpolate before a convolution."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Sequential(nn.ReflectionPad2d(4), nn.Conv2d(3, 16, 9))
        self.i1 = nn.InstanceNorm2d(16, affine=True)
        self.c2 = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(16, 32, 3, 2))
        self.i2 = nn.InstanceNorm2d(32, affine=True)
        self.res = nn.Sequential(*[StyleResidual(32) for _ in range(4)])
        self.up = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(32, 16, 3))
        self.i3 = nn.InstanceNorm2d(16, affine=True)
        self.out = nn.Sequential(nn.ReflectionPad2d(4), nn.Conv2d(16, 3, 9))

    def forward(self, x):
        y = F.relu(self.i1(self.c1(x)))
        y = F.relu(self.i2(self.c2(y)))
        y = self.res(y)
        y = F.interpolate(y, scale_factor=2.0, mode="nearest")
        y = F.relu(self.i3(self.up(y)))
        return self.out(y)


class SuperResolution(nn.Module):
    """pytorch/examples' super-resolution net: four convolutions and
    nn.PixelShuffle(3), one module ReLU applied four times."""

    def __init__(self, upscale_factor: int = 3):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, 5, 1, 2)
        self.conv2 = nn.Conv2d(64, 64, 3, 1, 1)
        self.conv3 = nn.Conv2d(64, 32, 3, 1, 1)
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, 3, 1, 1)
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


class DecoderLM(nn.Module):
    """PyTorch's own nn.TransformerDecoder (3 pre-norm layers, dropout 0.1,
    batch first) over token embeddings plus a learned position table sliced
    to the length, cross-attending to a second input; the causal mask made
    in forward by torch.triu."""

    def __init__(self, vocab: int = 500, d: int = 64, layers: int = 3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, 32, d) * 0.02)
        layer = nn.TransformerDecoderLayer(d, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
        self.dec = nn.TransformerDecoder(layer, layers)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, memory):
        t = tokens.size(1)
        mask = torch.triu(torch.full((t, t), float("-inf"), device=tokens.device), diagonal=1)
        return self.head(self.dec(self.emb(tokens) + self.pos[:, :t], memory, tgt_mask=mask))


class Siamese(nn.Module):
    """pytorch/examples' siamese network, a smaller tower: one tower run on
    each of two inputs (its weights read twice), the two embeddings
    concatenated, a sigmoid head."""

    def __init__(self):
        super().__init__()
        self.tower = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3),
                                   nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 1))
        self.sigmoid = nn.Sigmoid()

    def forward_once(self, x):
        return self.tower(x)

    def forward(self, input1, input2):
        output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(output))


class NormalizedPolicy(nn.Module):
    """A policy behind an observation normaliser that updates its running
    mean and variance at every call, as reinforcement-learning code keeps
    them (RunningMeanStd), in training and inference alike: each forward
    reads what the one before wrote."""

    def __init__(self, obs: int = 24, actions: int = 6):
        super().__init__()
        self.register_buffer("mean", torch.zeros(obs))
        self.register_buffer("var", torch.ones(obs))
        self.register_buffer("count", torch.tensor(1e-4))
        self.pi = nn.Sequential(nn.Linear(obs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, actions))

    def forward(self, obs):
        with torch.no_grad():
            n = float(obs.size(0))
            delta = obs.mean(0) - self.mean
            total = self.count + n
            self.mean.add_(delta * n / total)
            self.var.copy_((self.var * self.count + obs.var(0, unbiased=False) * n
                            + delta * delta * self.count * n / total) / total)
            self.count.add_(n)
        return self.pi((obs - self.mean) / torch.sqrt(self.var + 1e-8))


class Chomp1d(nn.Module):
    def __init__(self, chomp_size: int):
        super().__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs: int, n_outputs: int, kernel_size: int, dilation: int, dropout: float = 0.2):
        super().__init__()
        padding = (kernel_size - 1) * dilation
        wn = nn.utils.weight_norm
        self.conv1 = wn(nn.Conv1d(n_inputs, n_outputs, kernel_size, padding=padding, dilation=dilation))
        self.conv2 = wn(nn.Conv1d(n_outputs, n_outputs, kernel_size, padding=padding, dilation=dilation))
        self.net = nn.Sequential(self.conv1, Chomp1d(padding), nn.ReLU(), nn.Dropout(dropout),
                                 self.conv2, Chomp1d(padding), nn.ReLU(), nn.Dropout(dropout))
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()

    def forward(self, x):
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(self.net(x) + res)


class Tcn(nn.Module):
    """locuslab's temporal convolutional network (sequential MNIST's): causal
    dilated Conv1d under torch.nn.utils.weight_norm, chomped, with dropout.
    weight_norm's hook keeps torch.jit.script out, so it is exported as
    users trace it for training: in training mode, its dropout traced with
    train=True, which an inference plan of the file draws too."""

    def __init__(self):
        super().__init__()
        chans = [1, 25, 25, 25, 25]
        self.network = nn.Sequential(*[TemporalBlock(chans[i], chans[i + 1], 7, 2 ** i) for i in range(4)])
        self.linear = nn.Linear(25, 10)

    def forward(self, x):
        return F.log_softmax(self.linear(self.network(x)[:, :, -1]), dim=1)


class SpectralNormDiscriminator(nn.Module):
    """A GAN discriminator under torch.nn.utils.spectral_norm (SNGAN), which
    a hook computes and torch.jit.script cannot compile: traced in training
    mode, as one traces to train, its power iteration writes the buffers u
    and v with `out=` ops at every forward. PyTorch runs that trace only
    without autograd (out= with a weight that needs a gradient fails), so
    it infers and cannot train."""

    def __init__(self):
        super().__init__()
        sn = nn.utils.spectral_norm
        self.c1 = sn(nn.Conv2d(3, 32, 4, 2, 1))
        self.c2 = sn(nn.Conv2d(32, 64, 4, 2, 1))
        self.c3 = sn(nn.Conv2d(64, 128, 4, 2, 1))
        self.fc = sn(nn.Linear(128 * 4 * 4, 1))

    def forward(self, x):
        x = F.leaky_relu(self.c1(x), 0.2)
        x = F.leaky_relu(self.c2(x), 0.2)
        x = F.leaky_relu(self.c3(x), 0.2)
        return self.fc(x.flatten(1))


def efficientnet():
    """torchvision's EfficientNet-B0: SiLU, squeeze-excitation, stochastic
    depth's Bernoulli draw per sample in training."""
    from torchvision.models import efficientnet_b0
    return efficientnet_b0(num_classes=10)


# heldout/NAME.script.pt: torchvision classifiers at small inputs that the
# fidelity benchmark (bench_exec) plans and runs as a user would (the first
# four), torchvision's ViT and ConvNeXt, PyTorch's own nn.Transformer and
# nn.GRU (tried as a new user would after the schedules and replicas were
# written: docs/models.md), a top-2 mixture of experts and a VQ
# bottleneck (the twenty-fourth session's), GoogLeNet's outputs that may be
# None (the twenty-fifth's), torch.no_grad() in forward (a distillation
# teacher, a mean teacher), Hugging Face's forward signature of
# Optional[Tensor] = None arguments, an LSTM over packed sequences and
# ALBERT's one layer in a loop (the twenty-ninth's), torchvision's Swin
# Transformer and video ResNet (the thirtieth's), a GPT whose forward calls
# its blocks' parts (the thirty-first's), a Conformer, a DLRM and a
# WaveNet (the thirty-second's), a frozen feature extractor, a GPT
# fine-tuned with LoRA, a nanoGPT and a Hugging Face style classifier that
# return their own losses (the thirty-third's), and pytorch/examples' word
# language model, and (the fifty-fourth's) pytorch/examples' time sequence
# prediction, VAE, DCGAN generator, fast neural style, super-resolution and
# siamese network, nn.TransformerDecoder, EfficientNet-B0, a policy whose
# observation normaliser writes its buffers at every call, and a spectrally
# normalised discriminator and locuslab's TCN traced in training mode;
# nothing was tuned on them. Kept
# out of the folder the tests sweep, for CI time; one test trains each over
# 2 stages (tests/executor/test_training.cpp).
HELDOUT = {
    "mobilenet_v2": (mobilenet_v2, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "resnet18": (resnet18, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "shufflenet": (shufflenet, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "squeezenet": (squeezenet, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "vit": (vit, [spec("x", "float32", [8, 3, 32, 32])], ("script",)),
    "convnext": (convnext, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "seq2seq": (Seq2Seq, [spec("src", "int64", [8, 12], value_range=(0, 300)),
                          spec("tgt", "int64", [8, 10], value_range=(0, 300))], ("script",)),
    "gru_tagger": (GruTagger, [spec("x", "int64", [8, 20], value_range=(0, 500))], ("script",)),
    "moe": (TopTwoMoE, [spec("x", "float32", [8, 10, 16])], ("script",)),
    "vq": (VQBottleneck, [spec("x", "float32", [16, 20])], ("script",)),
    "googlenet": (googlenet, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "swin": (swin, [spec("x", "float32", [8, 3, 32, 32])], ("script",)),
    "r3d": (r3d, [spec("x", "float32", [8, 3, 4, 32, 32])], ("script",)),
    "lraspp": (lraspp, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "centred": (Centred, [spec("x", "float32", [8, 16])], ("script",)),
    "distill": (Distill, [spec("x", "float32", [8, 32])], ("script",)),
    "mean_teacher": (MeanTeacher, [spec("x", "float32", [8, 16])], ("script",)),
    "lstm_packed": (PackedTagger, [spec("ids", "int64", [8, 12], value_range=(0, 50)),
                                   spec("lengths", "int64", [8], value_range=(1, 13))], ("script",)),
    "albert": (SharedLayers, [spec("ids", "int64", [8, 16], value_range=(0, 300))], ("script",)),
    # the spec gives input_ids only: the rest take their defaults
    "root_reach": (RootReach, [spec("idx", "int64", [8, 32], value_range=(0, 256))], ("script",)),
    "conformer": (Conformer, [spec("feats", "float32", [8, 64, 40])], ("script",)),
    "dlrm": (Dlrm, [spec("dense", "float32", [16, 13]), spec("sparse", "int64", [16, 4, 3], value_range=(0, 1000))],
             ("script",)),
    "wavenet": (WaveNetStack, [spec("wav", "float32", [8, 1, 256])], ("script",)),
    "simclr": (SimClr, [spec("x", "float32", [8, 3, 32, 32])], ("script",)),
    "finetune": (finetune, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "lora_gpt": (LoraGpt, [spec("idx", "int64", [8, 32], value_range=(0, 256))], ("script",)),
    "nanogpt": (NanoGpt, [spec("idx", "int64", [8, 32], value_range=(0, 256)),
                          spec("targets", "int64", [8, 32], value_range=(0, 256))], ("script",)),
    "hf_classifier": (HfClassifier, [spec("input_ids", "int64", [8, 12], value_range=(0, 100)),
                                     spec("labels", "int64", [8], value_range=(0, 5))], ("script",)),
    "summed_regression": (SummedRegression, [spec("x", "float32", [8, 16]), spec("target", "float32", [8, 4])],
                          ("script",)),
    "bert_style": (BertStyle, [spec("input_ids", "int64", [8, 16], value_range=(0, 400))], ("script",)),
    "gpt_bf16": (gpt_bf16, [spec("idx", "int64", [8, 32], value_range=(0, 256))], ("script",)),
    # bptt 35, batch 20, as the example trains
    "word_lm": (WordLM, [spec("input", "int64", [35, 20], batch_dim=1, value_range=(0, 2000)),
                         spec("hidden[0]", "float32", [2, 20, 200], 1),
                         spec("hidden[1]", "float32", [2, 20, 200], 1)],
                ("script",)),
    "time_sequence": (TimeSequence, [spec("input", "float32", [8, 40])], ("script",)),
    "vae": (Vae, [spec("x", "float32", [16, 1, 28, 28])], ("script",)),
    "dcgan": (DcganGenerator, [spec("z", "float32", [8, 100, 1, 1])], ("script",)),
    "fast_neural_style": (FastNeuralStyle, [spec("x", "float32", [4, 3, 64, 64])], ("script",)),
    "super_resolution": (SuperResolution, [spec("x", "float32", [8, 1, 32, 32])], ("script",)),
    "decoder_lm": (DecoderLM, [spec("tokens", "int64", [8, 24], value_range=(0, 500)),
                               spec("memory", "float32", [8, 10, 64])], ("script",)),
    "siamese": (Siamese, [spec("input1", "float32", [8, 1, 28, 28]), spec("input2", "float32", [8, 1, 28, 28])],
                ("script",)),
    "efficientnet": (efficientnet, [spec("x", "float32", [8, 3, 64, 64])], ("script",)),
    "normalized_policy": (NormalizedPolicy, [spec("obs", "float32", [16, 24])], ("script",)),
    "sn_discriminator": (SpectralNormDiscriminator, [spec("x", "float32", [8, 3, 32, 32])], ("trace-train",)),
    "tcn": (Tcn, [spec("x", "float32", [16, 1, 96])], ("trace-train",)),
}

@torch.jit.script
class Timer(object):
    """A context manager of the user's own (as one would time a block)."""

    def __init__(self, label: str):
        self.label = label
        self.entered = 0

    def __enter__(self):
        self.entered += 1

    def __exit__(self, kind: Any, value: Any, trace: Any):
        pass


@torch.jit.script
class Counter(object):
    """State kept in a TorchScript object forward makes and assigns to."""

    def __init__(self):
        self.n = 0


class TimedBlock(nn.Module):
    """`with Timer(...):` around a layer: refused, naming the class."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)

    def forward(self, x):
        with Timer("layer"):
            y = self.layer(x)
        return y


class CountedBlock(nn.Module):
    """Assigns a field of a TorchScript object: refused, naming the field."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)

    def forward(self, x):
        counter = Counter()
        counter.n = counter.n + 1
        return self.layer(x) * counter.n


# fixtures/NAME.pt, scripted from these modules, for the error tests.
CLASS_FIXTURES = {"user_context": TimedBlock, "object_state": CountedBlock}

# fixtures/NAME.pt: a TorchScript module with only this source.
ERROR_FIXTURES = {
    "no_forward": "def run(self, x):\n    return x\n",
    "dict_input": "def forward(self, x: Dict[str, Tensor]):\n    return x['a'] * 2\n",
    "string_input": "def forward(self, x: Tensor, s: str):\n    return x * 2\n",
    # a dict of str keys is taken (torchvision's segmentation models), not of int keys
    "dict_output": "def forward(self, x: Tensor) -> Dict[int, Tensor]:\n    return {0: x * 2}\n",
    "string_output": "def forward(self, x: Tensor) -> str:\n    return 'hello'\n",
    # None may sit among the outputs (GoogLeNet's), not be all of them
    "none_output": "def forward(self, x: Tensor):\n    return (None, None)\n",
    "two_inputs": "def forward(self, x: Tensor, y: Tensor):\n    return x + y\n",
    # pairs of samples, each pair's sum given to both: a micro-batch of 1 cannot run
    "sample_pairs": "def forward(self, x: Tensor):\n"
                    "    return x.reshape(x.size(0) // 2, 2, 3).sum(1).repeat_interleave(2, 0)\n",
    # checks its data: raises (in the TorchScript interpreter) on values over 100
    "bounded": "def forward(self, x: Tensor):\n    if bool(x.abs().max() > 100.0):\n"
               "        raise ValueError('x must lie within [-100, 100]')\n    return torch.relu(x) * 2\n",
    # a mean over the batch beside the per-sample output (a VQ bottleneck's
    # commitment loss): micro-batches' outputs cannot be joined
    "batch_mean": "def forward(self, x: Tensor):\n    return (torch.relu(x) * 2, x.pow(2).mean())\n",
    # a mean over the batch as its only output (a whole-graph readout), and
    # no loss: training has nothing to split by the batch or to train on
    "batch_pooled": "def forward(self, x: Tensor):\n    return torch.relu(x).mean(0, keepdim=True) * 2\n",
    # runs at a batch of 8 only (a whole graph's nodes, an edge list over
    # them): its outputs' batch dimension cannot be found at other batches
    "fixed_batch": "def forward(self, x: Tensor):\n    return torch.relu(x.reshape(8, -1)) * 2\n",
    # mixed precision turned on inside forward: plans run the model's own dtypes
    "autocast_on": "def forward(self, x: Tensor):\n    with torch.cuda.amp.autocast():\n        y = x * 2\n"
                   "    return y\n",
    # a float argument with a default: left out it takes it, given it cannot be
    "float_default": "def forward(self, x: Tensor, scale: float = 2.0):\n    return x * scale\n",
}

# fixtures/NAME.pt as above, for the graph tests: forms of a construct that
# models in the zoo write only one way. The context managers mpplan takes:
# record_function, autocast(enabled=False), and torch.no_grad() with one
# object for several `with` statements, nested, inside an if, around a list
# made outside it.
FORM_FIXTURES = {
    "context_forms": "def forward(self, x: Tensor, w: Tensor):\n"
                     "    with torch.autograd.profiler.record_function('forms'):\n        x = x * 1.5\n"
                     "    with torch.cuda.amp.autocast(enabled=False):\n        w = w + 0.5\n"
                     "    g = torch.no_grad()\n    with g:\n"
                     "        a = x * w\n    if bool(x.sum() > 0):\n        with torch.no_grad():\n"
                     "            with g:\n                b = a + w\n            c = torch.cat([b, x * w])\n"
                     "    else:\n        c = torch.cat([x, w])\n    ys = [x, w * 2]\n    with g:\n"
                     "        d = torch.cat(ys)\n    return c * w.sum() + d\n",
}

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "int32": torch.int32}


def example_inputs(specs, batch=2):
    """Small inputs for tracing: the spec's shape with the batch dim cut down."""
    out = []
    for s in specs:
        shape = list(s["shape"])
        shape[s["batch_dim"]] = min(batch, shape[s["batch_dim"]])
        if "range" in s:
            out.append(torch.randint(s["range"][0], s["range"][1], shape, dtype=DTYPES[s["dtype"]]))
        else:
            out.append(torch.randn(shape, dtype=DTYPES[s["dtype"]]))
    return tuple(out)


# nn.TransformerEncoderLayer (1.13) lists `batch_first` as a constant it never sets.
warnings.filterwarnings("ignore", message="'batch_first' was found in ScriptModule constants")


def export(name, out_dir, table=ZOO):
    make, specs, variants = table[name]
    torch.manual_seed(0)
    model = make().eval()
    extra = {SPEC_FILE: json.dumps({"inputs": specs})}
    written = []
    for variant in variants:
        if variant == "script":
            module = torch.jit.script(model)
        elif variant == "trace-train":  # as traced for training: what runs only in training is in the trace
            module = torch.jit.trace(model.train(), example_inputs(specs), check_trace=False)
            model.eval()
        else:
            with torch.no_grad():
                module = torch.jit.trace(model, example_inputs(specs), check_trace=False)
        path = os.path.join(out_dir, f"{name}.{variant.replace('-', '_')}.pt")
        tmp = path + ".tmp"
        torch.jit.save(module, tmp, _extra_files=extra)
        os.replace(tmp, path)
        written.append(path)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for the .pt files")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        sys.exit(f"export.py: unknown model {unknown[0]!r} (known: {', '.join(ZOO)})")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for name in names:
        for path in export(name, args.out):
            print(f"wrote {path}")
    if not args.only:
        heldout = os.path.join(args.out, "heldout")
        os.makedirs(heldout, exist_ok=True)
        for name in HELDOUT:
            for path in export(name, heldout, HELDOUT):
                print(f"wrote {path}")
    # A common mistake, for the loader's error tests: torch.save of a
    # state dict is a zip archive but not a TorchScript program.
    fixtures = os.path.join(args.out, "fixtures")
    os.makedirs(fixtures, exist_ok=True)
    torch.save(Toy().state_dict(), os.path.join(fixtures, "toy_state_dict.pt"))
    # The error tests' other files (tests/errors/test_errors.cpp), made here
    # so that the test needs no LibTorch of its own: models with a method or
    # signature mpplan refuses, and tensors of a shape mpexec refuses.
    for name, source in {**ERROR_FIXTURES, **FORM_FIXTURES}.items():
        module = type(name, (torch.jit.ScriptModule,), {})()  # a class of its own per method set
        module.define(source)
        module.save(os.path.join(fixtures, name + ".pt"))
    for name, make in CLASS_FIXTURES.items():
        torch.jit.script(make()).save(os.path.join(fixtures, name + ".pt"))
    torch.save(torch.zeros(20, 7), os.path.join(fixtures, "zeros_20x7.pt"))
    torch.save(torch.full((8, 3), 1000.0), os.path.join(fixtures, "thousands_8x3.pt"))
    torch.save(torch.zeros(20, 3), os.path.join(fixtures, "zeros_20x3.pt"))


if __name__ == "__main__":
    main()
