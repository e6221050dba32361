"""The plugin's configs, registered as hydra/sweeper=dlbench and hydra/launcher=dlbench."""
from dataclasses import dataclass
from typing import Dict, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class SweeperConf:
    _target_: str = "hydra_plugins.dlbench_launcher.launcher.DlbenchSweeper"
    max_batch_size: Optional[int] = None  # None: the whole sweep is one batch, checked whole
    params: Optional[Dict[str, str]] = None


@dataclass
class LauncherConf:
    _target_: str = "hydra_plugins.dlbench_launcher.launcher.DlbenchLauncher"


ConfigStore.instance().store(group="hydra/sweeper", name="dlbench", node=SweeperConf,
                             provider="dlbench")
ConfigStore.instance().store(group="hydra/launcher", name="dlbench", node=LauncherConf,
                             provider="dlbench")
