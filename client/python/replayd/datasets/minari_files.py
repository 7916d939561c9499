"""Reading Minari datasets (data_format ``hdf5``) with h5py and json only, one episode at a
time (bounded memory).

A dataset folder holds ``metadata.json`` (Minari 0.5: the spaces as JSON strings,
``total_episodes``, ``total_steps``, ``data_format``, ``dataset_id``, ...) and
``main_data.hdf5``: groups ``episode_0``, ``episode_1``, ... each with ``observations``
(T+1 rows), ``actions``, ``rewards``, ``terminations``, ``truncations`` (T rows) and
optional ``infos``; a Dict space is a subgroup per key, a Tuple space a subgroup
``_index_0``, ...; an image space in 0.5 a variable-length dataset of JPEG byte strings.
Minari 0.4 kept the metadata in the HDF5 file's root attributes instead of
``metadata.json``.

h5py is imported by `open_minari` only (it is an optional dependency of the client).
"""
from __future__ import annotations

import importlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .spaces import SpaceLeaf, space_leaves

__all__ = ["MinariSource", "open_minari", "InfoLeaf", "json_safe", "import_h5py"]

#: The dataset of each step's policy version (docs/VERSIONS.md) that replayd's exports
#: write (a D4RL file's root, a Minari episode's group) when a version is not 0, and its
#: loads read back.
POLICY_VERSIONS = "policy_versions"

_EPISODE = re.compile(r"^episode_(\d+)$")
_NAME_CHARS = re.compile(r"^[A-Za-z0-9_.\-/]+$")


def import_h5py() -> Any:
    """h5py, or an ImportError saying how to install it."""
    try:  # by name: h5py has no type information, and mypy need not look for it
        h5py = importlib.import_module("h5py")
    except ImportError:
        raise ImportError("replayd's dataset commands need h5py: apt-get install python3-h5py "
                          "(Debian) or pip install h5py") from None
    return h5py


def json_safe(value: Any) -> Any:
    """An HDF5 attribute or dataset value as JSON (bytes as text, numpy as Python)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSU":
            return [json_safe(v) for v in value.tolist()]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


@dataclass(frozen=True)
class InfoLeaf:
    """One array of an episode's ``infos``: its path under ``infos``, dtype, per-step shape."""
    path: str
    dtype: np.dtype[Any]
    shape: Tuple[int, ...]


@dataclass
class MinariSource:
    """An open Minari dataset: its metadata (as metadata.json has it), the leaves of its
    spaces, and its episodes read one at a time. Close it (or use `with`)."""

    data_dir: str
    metadata: Dict[str, Any]
    observation_leaves: List[SpaceLeaf]
    action_leaves: List[SpaceLeaf]
    file: Any
    episode_names: List[str] = field(default_factory=list)
    layout: str = "0.5"  # or "0.4": metadata in the file's root attributes

    def __enter__(self) -> "MinariSource":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()

    @property
    def total_steps(self) -> int:
        total = self.metadata.get("total_steps")
        if total is None:
            total = sum(int(self.file[name]["rewards"].shape[0]) for name in self.episode_names)
        return int(total)

    def jpeg_leaves(self) -> List[Tuple[str, SpaceLeaf]]:
        """(kind, leaf) of the image leaves stored as JPEG byte strings (variable-length
        datasets, as Minari 0.5 writes them), from the first episode; kind is
        ``observations`` or ``actions``."""
        out: List[Tuple[str, SpaceLeaf]] = []
        if not self.episode_names:
            return out
        group = self.file[self.episode_names[0]]
        for kind, leaves in (("observations", self.observation_leaves),
                             ("actions", self.action_leaves)):
            for leaf in leaves:
                if leaf.image and group[_hdf5_path(kind, leaf)].dtype.kind == "O":
                    out.append((kind, leaf))
        return out

    def longest_jpeg(self, kind: str, leaf: SpaceLeaf) -> int:
        """The longest JPEG frame of a leaf over every episode (reads each episode's
        frames once, one episode at a time)."""
        longest = 0
        for name in self.episode_names:
            for frame in self.file[name][_hdf5_path(kind, leaf)][()]:
                longest = max(longest, len(frame))
        return longest

    def irregular_ends(self) -> bool:
        """Whether some episode's ``terminations`` / ``truncations`` are not exactly one
        True at its last step (both True, as a time limit that coincides with a
        termination records it; neither; or one before the end). Reads two small arrays
        per episode."""
        for name in self.episode_names:
            group = self.file[name]
            terminations = np.asarray(group["terminations"][()], bool)
            truncations = np.asarray(group["truncations"][()], bool)
            if not len(terminations):
                continue
            if terminations[:-1].any() or truncations[:-1].any() or \
                    terminations[-1] == truncations[-1]:
                return True
        return False

    def info_leaves(self) -> Tuple[List[InfoLeaf], Optional[str]]:
        """The arrays of the first episode's ``infos`` and whether they have T+1 rows
        (``"next"``: the reset's info first, as Minari 0.5's DataCollector writes them)
        or T (``"step"``); ([], None) without infos."""
        if not self.episode_names:
            return [], None
        group = self.file[self.episode_names[0]]
        if "infos" not in group:
            return [], None
        steps = int(group["rewards"].shape[0])
        leaves: List[InfoLeaf] = []
        rows: Optional[int] = None

        def visit(name: str, obj: Any) -> None:
            nonlocal rows
            if not hasattr(obj, "dtype"):
                return
            if not _NAME_CHARS.match(name):
                raise ValueError(f"info '{name}': its name does not make a field name "
                                 "(letters, digits, '_', '.', '-'); load with infos=False")
            if obj.dtype.kind not in "biuf" or obj.ndim < 1:
                raise ValueError(f"info '{name}' of dtype {obj.dtype} cannot be a field "
                                 "(numbers and bools can); load with infos=False")
            if rows is None:
                rows = int(obj.shape[0])
            elif rows != obj.shape[0]:
                raise ValueError(f"infos of different lengths ({rows} and {obj.shape[0]} "
                                 f"rows); load with infos=False")
            leaves.append(InfoLeaf(name, np.dtype(obj.dtype), tuple(obj.shape[1:])))

        group["infos"].visititems(visit)
        if not leaves:
            return [], None
        if rows == steps + 1:
            return leaves, "next"
        if rows == steps:
            return leaves, "step"
        raise ValueError(f"infos of {rows} rows in an episode of {steps} steps; load with "
                         "infos=False")

    def episodes(self, infos: List[InfoLeaf]) -> Iterator[Dict[str, Any]]:
        """Each episode in id order: ``observations`` / ``actions`` (leaf path -> array,
        JPEG leaves as object arrays of byte strings), ``rewards``, ``terminations``,
        ``truncations``, ``infos`` (path -> array) and, when the file has them,
        ``policy_versions`` (one per step) as read from the file."""
        for name in self.episode_names:
            group = self.file[name]
            episode: Dict[str, Any] = {"name": name}
            for kind, leaves in (("observations", self.observation_leaves),
                                 ("actions", self.action_leaves)):
                episode[kind] = {leaf.path: group[_hdf5_path(kind, leaf)][()] for leaf in leaves}
            for key in ("rewards", "terminations", "truncations"):
                episode[key] = group[key][()]
            episode["infos"] = {leaf.path: group[f"infos/{leaf.path}"][()] for leaf in infos}
            if POLICY_VERSIONS in group:  # written by replayd's export (docs/VERSIONS.md)
                episode[POLICY_VERSIONS] = group[POLICY_VERSIONS][()]
            yield episode


def _hdf5_path(kind: str, leaf: SpaceLeaf) -> str:
    return kind if not leaf.hdf5_path else f"{kind}/{leaf.hdf5_path}"


def _data_dir(path: str) -> Tuple[str, str]:
    """(folder, main_data.hdf5) of a dataset given as its folder, its ``data`` folder or
    its HDF5 file."""
    if os.path.isfile(path):
        return os.path.dirname(os.path.abspath(path)), path
    for candidate in (path, os.path.join(path, "data")):
        main = os.path.join(candidate, "main_data.hdf5")
        if os.path.isfile(main):
            return candidate, main
    raise FileNotFoundError(f"{path}: no Minari dataset here (expected main_data.hdf5 in it "
                            "or in its data/ folder)")


def open_minari(path: str) -> MinariSource:
    """Opens the Minari dataset at `path` (its folder, ``data`` folder or HDF5 file):
    Minari 0.5 (metadata.json) or 0.4 (metadata in the HDF5 root attributes). Raises
    FileNotFoundError / ValueError naming what is missing or unsupported."""
    h5py = import_h5py()
    data_dir, main = _data_dir(path)
    metadata_path = os.path.join(data_dir, "metadata.json")
    file = h5py.File(main, "r")
    try:
        if os.path.isfile(metadata_path):
            with open(metadata_path) as f:
                metadata = json.load(f)
            layout = "0.5"
        else:
            metadata = {key: json_safe(value) for key, value in file.attrs.items()}
            layout = "0.4"
        data_format = metadata.get("data_format", "hdf5")
        if data_format != "hdf5":
            raise ValueError(f"{path}: data_format {data_format!r}; replayd reads hdf5 "
                             "Minari datasets")
        for key in ("observation_space", "action_space"):
            if key not in metadata:
                raise ValueError(f"{path}: the metadata has no {key} (datasets that only "
                                 "name their environment are not supported)")
        observation = space_leaves(metadata["observation_space"])
        action = space_leaves(metadata["action_space"])
        names = sorted((n for n in file.keys() if _EPISODE.match(n)),
                       key=lambda n: int(_EPISODE.match(n).group(1)))  # type: ignore[union-attr]
        return MinariSource(data_dir, metadata, observation, action, file, names, layout)
    except BaseException:
        file.close()
        raise
