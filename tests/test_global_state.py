"""Loading a model changes no global state, even when it fails: log levels, progress bars, the GGUF bar patch."""
import logging

import numpy as np
import pytest

import real_attention as ra
from real_attention.engine import models
from real_attention.engine.models import ModelChoice, load_model


def _state():
    import gguf
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    return (logging.getLogger("huggingface_hub").level, logging.getLogger("transformers").level,
            hf_logging.is_progress_bar_enabled(), gguf_utils.tqdm, gguf.GGUFReader, gguf.get_tensor_name_map)


@pytest.fixture()
def user_settings():
    """The user's own settings, unlike the ones loading uses; put back afterwards."""
    from transformers.utils import logging as hf_logging

    before = _state()
    logging.getLogger("huggingface_hub").setLevel(logging.DEBUG)
    logging.getLogger("transformers").setLevel(logging.INFO)
    hf_logging.enable_progress_bar()
    yield _state()
    logging.getLogger("huggingface_hub").setLevel(before[0])
    logging.getLogger("transformers").setLevel(before[1])
    (hf_logging.enable_progress_bar if before[2] else hf_logging.disable_progress_bar)()


def test_a_load_that_fails_inside_transformers_restores_every_setting(user_settings, tiny_model_dir, monkeypatch):
    import gguf
    import transformers
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    seen = {}

    class Failing:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            seen["during"] = (logging.getLogger("huggingface_hub").level, logging.getLogger("transformers").level,
                              hf_logging.is_progress_bar_enabled(), gguf_utils.tqdm is user_settings[3],
                              gguf.GGUFReader is user_settings[4], gguf.get_tensor_name_map is user_settings[5])
            raise OSError("disk on fire")

    monkeypatch.setattr(transformers, "AutoTokenizer", Failing)
    monkeypatch.setattr(models, "check_gguf_packages", lambda choice: None)
    choice = ModelChoice(name="x", revision=None, path=tiny_model_dir, gguf_file="model.gguf")
    with pytest.raises(ra.ModelUnavailable, match="disk on fire"):
        load_model(choice)
    # quieted while loading (the GGUF bar and gguf's reader and name map patched too), all of it back afterwards
    assert seen["during"] == (logging.ERROR, logging.ERROR, False, False, False, False)
    assert _state() == user_settings


def test_a_load_that_raises_anything_restores_every_setting(user_settings, tiny_model_dir, monkeypatch):
    import transformers

    class Broken:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            raise RuntimeError("a bug")

    monkeypatch.setattr(transformers, "AutoModel", Broken)
    with pytest.raises(RuntimeError, match="a bug"):
        load_model(ModelChoice(name="x", revision=None, path=tiny_model_dir))
    assert _state() == user_settings


def test_a_missing_gguf_package_is_one_error_and_changes_nothing(user_settings, tiny_model_dir, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    choice = ModelChoice(name="decoder", revision=None, path=tiny_model_dir, gguf_file="model.gguf")
    with pytest.raises(ra.MissingPackage, match="gguf is missing"):
        load_model(choice)
    assert _state() == user_settings


def test_a_load_that_works_restores_every_setting(user_settings, tiny_model_dir):
    load_model(ModelChoice(name="x", revision=None, path=tiny_model_dir))
    assert _state() == user_settings


def test_a_gguf_file_is_read_once_while_a_model_loads(tmp_path):
    """transformers reads a GGUF file three times (config, tokenizer, weights) and builds gguf's tensor-name map
    once per module: while loading, one reader per file and one map per architecture and depth, then gguf's own
    functions again, also after an error."""
    import gguf

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_tensor("token_embd.weight", np.ones((4, 3), dtype=np.float32))
    for step in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        step()
    writer.close()
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with pytest.raises(RuntimeError, match="stop"), models.gguf_read_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first and gguf.GGUFReader(path, "r") is first
        assert first.tensors[0].name == "token_embd.weight"
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
        assert gguf.get_tensor_name_map(arch, 3) is not gguf.get_tensor_name_map(arch, 2)
        raise RuntimeError("stop")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader_class, name_map)
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)
