"""The commands that check one point's allocation rather than run a sweep (`launch health`,
`launch doctor`): their overrides checked and composed by Hydra as `python -m launch` would
compose them, without a run, and bad input said in one line (exit status 2)."""
import sys

from omegaconf import DictConfig

from contract import secrets
from launchers.plan import precheck
from launchers.suite import ROOT, ConfigError


class Done(Exception):
    """The command ends here with `code` (0 after --help, 2 after one line of bad input)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def refuse(message) -> int:
    """Bad input in one line, its secrets masked (an override may hold one: contract/secrets.py)."""
    print(f"error: {secrets.mask_text(str(message).splitlines()[0])}", file=sys.stderr)
    return 2


def overrides(argv, doc: str) -> list:
    """A command's key=value overrides; Done after --help (the command's `doc`) or when
    precheck refuses them."""
    if any(a in ("-h", "--help") for a in argv):
        print(doc)
        raise Done(0)
    problem = precheck.check(argv)
    if problem:
        raise Done(refuse(problem))
    return [a for a in argv if "=" in a and not a.startswith("-")]


def compose(overrides_: list[str]) -> DictConfig:
    """The point's config, composed by Hydra as `python -m launch` would, without its run."""
    from hydra import compose as hydra_compose, initialize_config_dir
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return hydra_compose(config_name="config", overrides=overrides_)


def bad_input() -> tuple:
    """What composing and making a point raise on bad input."""
    import omegaconf
    return ConfigError, omegaconf.errors.OmegaConfBaseException
