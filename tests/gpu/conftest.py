"""GPU tests: marked `gpu`, skipped only where CUDA is absent."""

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if not torch.cuda.is_available():
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture(scope="session")
def gpu_demo():
    """The demo model in bfloat16 on the GPU, computing with SDPA."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model

    quiet_transformers()
    return load_model("demo", "cuda", "bfloat16", "sdpa")
