"""Where nbgrader, run from a course folder, finds the exchange, its submissions, its collect and class list.

Also whether its collect checks the owner of a folder there (nbgrader's ``check_owner``)."""

from __future__ import annotations

import glob
import sys
from dataclasses import dataclass
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect

from autograder.exchange.collect import SafeCollect


def submissions_in_exchange(inbound: Path, student: str, assignment: str) -> list[Path]:
    """Every submission of ``assignment`` by ``student`` in the exchange's ``inbound`` folder, as nbgrader
    names them (``<student>+<assignment>+<timestamp>[+<random>]``); links included, none followed."""
    pattern = f"{glob.escape(student)}+{glob.escape(assignment)}+*"
    return sorted(path for path in Path(inbound).glob(pattern) if path.name.count("+") >= 2)


@dataclass
class ExchangeSettings:
    """Where nbgrader, run from a course folder, finds the exchange, which collect it runs, and whose folders
    there count (:mod:`autograder.exchange.owners`)."""

    inbound: Path | None  # <exchange>/<course_id>/inbound; None: no course id, or no such folder here
    collect: str  # the collect plugin's dotted name
    check_owner: bool = True  # nbgrader's check_owner: a folder counts only for the account that owns it
    class_list: Path | None = None  # c.SafeCollect.class_list, from the course folder; None: no class list
    root: Path | None = None  # the exchange's folder (c.Exchange.root), whether it exists or not

    @property
    def collect_is_safe(self) -> bool:
        # the package re-exports it: a configuration written before the exchange became a package names it so
        return self.collect in {
            f"{SafeCollect.__module__}.{SafeCollect.__qualname__}",
            "autograder.exchange.SafeCollect",
        }


def exchange_settings(root: Path) -> ExchangeSettings:
    """The exchange as ``nbgrader collect`` sees it from ``root``: the course's ``nbgrader_config.py``
    over Jupyter's configuration folders (``~/.jupyter``, ``/etc/jupyter``, ...), as nbgrader merges them.

    The files are the instructor's and are run here, as nbgrader runs them, with the warning filters
    that they set undone afterwards."""
    import warnings

    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import ConfigFileNotFound, JSONFileConfigLoader, PyFileConfigLoader

    config = Config()
    with warnings.catch_warnings():
        for folder in [*reversed(jupyter_config_path()), str(Path(root).resolve())]:  # the last one wins
            for loader in (PyFileConfigLoader, JSONFileConfigLoader):
                try:
                    name = "nbgrader_config.py" if loader is PyFileConfigLoader else "nbgrader_config.json"
                    config.merge(loader(name, path=folder).load_config())
                except ConfigFileNotFound:
                    continue

    def setting(name: str, classes: tuple[str, ...], default):
        for cls in classes:
            if cls in config and name in config[cls]:
                return config[cls][name]
        return default

    collect = setting("collect", ("ExchangeFactory",), ExchangeCollect)
    collect = collect if isinstance(collect, str) else f"{collect.__module__}.{collect.__qualname__}"
    exchange = setting("root", ("SafeCollect", "ExchangeCollect", "Exchange"), ExchangeCollect.root.default_value)
    course_id = setting("course_id", ("CourseDirectory",), "")
    inbound = Path(exchange) / course_id / "inbound" if course_id else None
    check_owner = setting("check_owner", ("SafeCollect", "ExchangeCollect", "Exchange"), True)
    class_list = setting("class_list", ("SafeCollect",), "")
    return ExchangeSettings(
        inbound if inbound is not None and inbound.is_dir() else None,
        collect,
        bool(check_owner) and sys.platform != "win32",  # nbgrader checks no owner on Windows
        Path(root) / class_list if class_list else None,
        Path(setting("root", ("ExchangeList", "Exchange"), ExchangeCollect.root.default_value)),
    )
