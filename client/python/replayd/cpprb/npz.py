"""cpprb's transition files (``save_transitions`` / ``load_transitions``): an ``.npz``
written by ``np.savez_compressed`` with the keys ``safe`` (True), ``version`` (1), ``data``
(the dict of get_all_transitions(), pickled as a 0-d object array), ``Nstep`` (whether the
data are n-step transitions) and ``cache`` (None). cpprb reads what `write` writes and
`read` reads what cpprb writes with ``safe=True``; its ``safe=False`` layout (the raw
memory of next_of / stack_compress) is refused. Used by replayd.cpprb only.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping

import numpy as np

FORMAT_VERSION = 1


def write(file: Any, data: Mapping[str, Any], nstep: bool) -> None:
    """Writes `data` (name -> array) to `file`, a path (numpy adds ``.npz``) or a binary
    file object."""
    arrays: Dict[str, Any] = {"safe": True, "version": FORMAT_VERSION, "data": dict(data),
                              "Nstep": bool(nstep), "cache": None}
    np.savez_compressed(file, **arrays)


def read(file: Any, nstep: bool) -> Dict[str, Any]:
    """The transitions of `file` for a buffer whose is_Nstep() is `nstep`. Raises
    ValueError (cpprb's messages where cpprb has them) when the Nstep flags differ, for an
    unknown version and for a ``safe=False`` file. Unpickles: never read an untrusted file."""
    with np.load(file, allow_pickle=True) as npz:
        version = npz["version"]
        if bool(npz["Nstep"]) != nstep:
            raise ValueError("Stored data and Buffer mismatch for Nstep")
        if version != FORMAT_VERSION:
            raise ValueError(f"Unknown Format Version: {version}")
        if not bool(npz["safe"]):
            raise ValueError("load_transitions: the file was saved by cpprb with safe=False "
                             "(its next_of/stack_compress memory layout); save it with "
                             "safe=True")
        data: Dict[str, Any] = npz["data"].item()
    return data
