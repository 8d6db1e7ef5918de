"""Loading a model changes no global state, even when it fails: log levels, progress bars, the GGUF bar patch."""
import logging

import pytest

import real_attention as ra
from real_attention.engine import models
from real_attention.engine.models import ModelChoice, load_model


def _state():
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    return (logging.getLogger("huggingface_hub").level, logging.getLogger("transformers").level,
            hf_logging.is_progress_bar_enabled(), gguf_utils.tqdm)


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
    import transformers
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    seen = {}

    class Failing:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            seen["during"] = (logging.getLogger("huggingface_hub").level, logging.getLogger("transformers").level,
                              hf_logging.is_progress_bar_enabled(), gguf_utils.tqdm is user_settings[3])
            raise OSError("disk on fire")

    monkeypatch.setattr(transformers, "AutoTokenizer", Failing)
    monkeypatch.setattr(models, "check_gguf_packages", lambda choice: None)
    choice = ModelChoice(name="x", revision=None, path=tiny_model_dir, gguf_file="model.gguf")
    with pytest.raises(ra.ModelUnavailable, match="disk on fire"):
        load_model(choice)
    # quieted while loading (the GGUF bar patched too), all of it back afterwards
    assert seen["during"] == (logging.ERROR, logging.ERROR, False, False)
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
    with pytest.raises(ra.ModelUnavailable, match="gguf is missing"):
        load_model(choice)
    assert _state() == user_settings


def test_a_load_that_works_restores_every_setting(user_settings, tiny_model_dir):
    load_model(ModelChoice(name="x", revision=None, path=tiny_model_dir))
    assert _state() == user_settings
