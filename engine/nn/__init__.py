"""A small ``nn``: Module, Parameter, layers, loss modules, ``functional``, ``init``
(initialisation) and ``utils`` (gradient clipping)."""
from engine.nn import functional, init, utils
from engine.nn.containers import ModuleDict, ModuleList
from engine.nn.layers import (Dropout, Embedding, Flatten, Identity, LayerNorm, LeakyReLU,
                              Linear, ReLU, Sequential, Sigmoid, Tanh)
from engine.nn.loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from engine.nn.module import IncompatibleKeys, Module
from engine.nn.parameter import Parameter

__all__ = ["Module", "Parameter", "IncompatibleKeys", "Linear", "Sequential", "ReLU", "Tanh",
           "Sigmoid", "Dropout", "Flatten", "LeakyReLU", "Identity", "LayerNorm", "Embedding",
           "ModuleList", "ModuleDict",
           "MSELoss", "L1Loss", "NLLLoss", "CrossEntropyLoss", "BCEWithLogitsLoss", "functional",
           "init", "utils"]
