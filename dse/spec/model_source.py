"""A space's ``workload.model`` given as a Hugging Face config.json: its architecture as workload columns.

    workload:
      model: configs/my-model.json       # relative to the space file; a path ending .json
      seq_len: 8192                      # where the file records no pre-training length

The file is read once, here (objectives.catalog.hf_config: the Llama, Mistral/Mixtral, Qwen2/Qwen3,
Qwen3-MoE, DeepSeek-V2/V3 and Kimi K2, gpt-oss, Gemma 1/2/3 and Llama 4 families); its columns become the
space's fixed workload columns (``n_layers``, ``d_model``, ..., the MLA ranks and attention windows where
it has them), each column the workload gives itself overriding the file's, and ``model`` keeps the path
as written, a label. The designs then spell out their architecture, so nothing reads the file again
(the scoring actors, a resumed run re-reads the space). A bad file is one line naming the space, the key,
the file and its key (a missing key, a value that is not a whole number, an unsupported model_type with
the supported ones); exit 2. A catalog id or an alias (objectives/catalog/model_aliases.yaml) is checked
as any catalog id, by the vocabulary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["model_workload"]


def model_workload(ck, workload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the workload keys left to check, the columns already checked) of a space's workload: where
    ``model`` is a config.json path, the file's architecture columns under the workload's own."""
    from objectives.catalog.hf_config import ConfigError, is_config_path, load

    label = workload.get("model")
    if not is_config_path(label):
        return workload, {}
    path = Path(label.strip()).expanduser()
    if not path.is_absolute() and ck.source not in ("<space>", ""):
        path = Path(ck.source).parent / path
    try:
        columns = load(path)
    except ConfigError as exc:
        ck.fail("workload.model", str(exc))
    rest = {k: v for k, v in workload.items() if k != "model"}
    fixed = {k: int(v) if isinstance(v, bool) else v for k, v in columns.items() if k not in rest}
    return rest, {"model": label.strip(), **fixed}
