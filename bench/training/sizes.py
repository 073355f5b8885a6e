#!/usr/bin/env python3
"""Gradient tensor sizes of ResNet-50 and BERT-base, one per line (elements of float32), in
layer order (the order of model.parameters(), which the forward pass uses first to last).

    python3 bench/training/sizes.py resnet50 > bench/training/resnet50.sizes
    python3 bench/training/sizes.py bert_base > bench/training/bert_base.sizes

Needs Debian's python3-torchvision (and python3-torch), run by Debian's own python3 (another
Python first in PATH does not see them). Nothing is downloaded: ResNet-50 is
torchvision's own model built with weights=None. BERT-base is built here from torch.nn modules
after its published architecture (vocabulary 30522, hidden 768, 12 layers of 12 heads,
intermediate 3072, 512 positions, 2 token types, LayerNorms, pooler), with the parameters in
the order of the reference implementation, since no package here ships it."""
import sys

import torch.nn as nn


class BertLayer(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        # attention: query, key, value, output projection, then its LayerNorm
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attention_output = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden)
        # feed-forward block and its LayerNorm
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.output_norm = nn.LayerNorm(hidden)


class BertBase(nn.Module):
    def __init__(self, vocab=30522, hidden=768, layers=12, intermediate=3072, positions=512, types=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(types, hidden)
        self.embeddings_norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(BertLayer(hidden, intermediate) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)


def model(name):
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None)
    if name == "bert_base":
        return BertBase()
    sys.exit("usage: sizes.py resnet50|bert_base")


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    sizes = [p.numel() for p in model(name).parameters()]
    print(f"# {name}: {len(sizes)} parameter tensors, {sum(sizes)} parameters (float32), layer order")
    print(f"# made by: python3 bench/training/sizes.py {name}")
    for n in sizes:
        print(n)


if __name__ == "__main__":
    main()
