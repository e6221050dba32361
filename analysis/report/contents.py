"""The report as a list of sections (`sections`), in the order the terminal prints them and
report.html shows them (analysis/report/page.py; docs/report.md): a certification's verdict
first where the path holds one (certify/, docs/certify.md), then the summary, then per
model its main tables, the special models, the input pipeline, checkpoints and published
figures, per model its detail tables, the collectives, and folded last the traces, the
environment and the failures with their log tails. Each section is a function of the results
in analysis/sections/; a new one is one line in AFTER_TABLES or AFTER_DETAILS.
"""
from typing import NamedTuple

from analysis.figures.training import training_points
from analysis.sections import (anatomy, certification, checkpoint, comm, environment, failures,
                               health, input_pipeline, network, published, special, summary, traces)
from analysis.sections.main_tables import detail_tables, limits_of, main_tables


class Section(NamedTuple):
    """One part of the report, in the order both the terminal and report.html show them."""
    key: str            # summary, model:<name>, detail:<name>, special, ..., failures
    text: str           # Markdown, as the terminal prints it ("": nothing to say)
    fold: bool = False  # report.html folds it (<details>), its first heading the summary line
    data: object = None  # what report.html draws itself: the summary, a model's points


def _comm(results, comm_table) -> str:
    return comm.render_comm(comm_table) if comm_table is not None and len(comm_table) else ""


# The sections after the main tables, in order: (key, fold, maker(results) -> Markdown).
# A new section (node health, a special model) is one line here: the terminal and
# report.html both show it, in this place.
AFTER_TABLES = (("network", False, network.section),  # NCCL's network; flags sockets on InfiniBand
                ("special", False, special.render_special),
                ("input", False, input_pipeline.section),   # data=files, bench=input (docs/data.md)
                ("checkpoint", False, checkpoint.section),  # bench=checkpoint, checkpoint.every
                ("published", False, published.section),
                ("anatomy", False, anatomy.section))   # host-bound or not; a trace's split
AFTER_DETAILS = (("traces", True, traces.section),
                 ("environment", True, environment.environment_block),
                 ("health", False, health.section),   # preflight=true: the nodes left out, and why
                 ("failures", True, failures.section))


def sections(results, comm_table=None) -> list:
    """The report, in order: the summary; per model its main tables; the special models,
    the input pipeline and published figures; per model its detail tables; collective
    bandwidth; traces, the environment and the failures. Sections with nothing to say
    are left out. `comm_table`: analysis.figures.comm.comm_table(results), when there is one."""
    s = summary.summary(results)
    out = [Section("certification", certification.section(results)),   # a verdict leads
           Section("summary", summary.text(s), data=s)]
    models = list(training_points(results).groupby("model", sort=True))
    limits = limits_of(results)
    out += [Section(f"model:{m}", main_tables(str(m), pts, limits), data=pts) for m, pts in models]
    out += [Section(key, make(results), fold) for key, fold, make in AFTER_TABLES]
    out += [Section(f"detail:{m}", detail_tables(str(m), pts), fold=True, data=pts)
            for m, pts in models]
    out.append(Section("comm", _comm(results, comm_table)))
    out += [Section(key, make(results), fold) for key, fold, make in AFTER_DETAILS]
    return [x for x in out if x.text]


def text(parts) -> str:
    """The terminal report of `sections`: every section's Markdown, in order."""
    return "\n\n".join(x.text for x in parts) + "\n"


def render(results, comm_table=None) -> str:
    """The terminal report."""
    return text(sections(results, comm_table))
