"""Each sweep job's config, composed by Hydra once per distinct combination of group choices.

Hydra's basic launcher composes every job from scratch (`load_sweep_config`, about 0.4 s:
nearly all of it the defaults list), and its basic sweeper does it once more to validate.
A job's config is that of its group overrides (`framework=`, `model=`, `preset=`, ...)
with its other overrides applied last; Hydra's own `load_configuration` does exactly that,
in that order. So the group part is composed once per distinct combination and cached,
and each job gets a copy with the rest applied by Hydra's own rule
(`ConfigLoaderImpl._apply_overrides_to_config`, hydra-core is pinned). Which override is
a group is decided by Hydra's own `Overrides` (defaults_list.py). Nothing here parses an
override by hand; Hydra's parser parses each distinct override string once (it costs
milliseconds, and a sweep repeats most of them in every job). The copy is a pickle round
trip, a few times cheaper than deepcopy of an OmegaConf tree.

What differs from a job composed by the basic launcher: the `hydra` node is shared by the
jobs of one combination, not copied (it is the costly part to copy), so `${hydra:...}` in
the task config reads the sweep's Hydra config, not per-job fields such as job.num
(no file of conf/ uses it).
"""
import pickle

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import CachingConfigRepository
from hydra._internal.defaults_list import Overrides
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf, flag_override, open_dict, read_write


class Compositions:
    """Job configs of one sweep: `job(overrides) -> (config without hydra, sweep dir)`."""

    def __init__(self, config_loader, master_config):
        self.loader, self.master = config_loader, master_config
        self.parser = OverridesParser.create()
        self.repo = CachingConfigRepository(config_loader.repository)
        self.bases = {}    # group overrides -> (pickled task config, its hydra node)
        self.parsed = {}   # override string -> (Override, whether it is a group override)
        self.composed = 0  # how many times Hydra composed a config (one per combination)

    def _parse(self, text: str):
        if text not in self.parsed:
            (override,) = self.parser.parse_overrides([text])
            config = Overrides(self.repo, [override]).config_overrides  # Hydra's rule, per override
            self.parsed[text] = (override, not config)
        return self.parsed[text]

    def split(self, overrides):
        """(the group overrides as given, the other overrides parsed), by Hydra's rule."""
        parsed = [self._parse(text) for text in overrides]
        return (tuple(o.input_line for o, group in parsed if group),
                [o for o, group in parsed if not group])

    def base(self, groups):
        if groups not in self.bases:
            full = self.loader.load_sweep_config(self.master, list(groups))
            self.composed += 1
            hydra_node = full.hydra
            with read_write(full), open_dict(full):
                del full["hydra"]
            self.bases[groups] = (pickle.dumps(full), hydra_node)
        return self.bases[groups]

    def job(self, overrides):
        groups, values = self.split(overrides)
        task, hydra_node = self.base(groups)
        cfg = pickle.loads(task)
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        OmegaConf.copy_cache(from_config=self.master, to_config=cfg)  # ${now:} as the sweep's
        return cfg, self.sweep_dir(cfg, hydra_node)

    @staticmethod
    def sweep_dir(cfg, hydra_node) -> str:
        """hydra.sweep.dir as this job resolves it (it may interpolate the job's own keys,
        `${output_root}`): the shared hydra node is lent to the job for the lookup."""
        with read_write(cfg), open_dict(cfg), flag_override(cfg, "no_deepcopy_set_nodes", True):
            cfg["hydra"] = hydra_node
            try:
                return str(cfg.hydra.sweep.dir)
            finally:
                del cfg["hydra"]
