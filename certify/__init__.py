"""`python -m launch certify SUITE`: a cluster's verdict (docs/certify.md).

A certification runs the suite's own parts in order, and sits above both launchers/ and
analysis/ (nothing of either imports it):

    suite.py      a suite file (conf/certify/<name>.yaml) read and checked, one line per mistake
    baselines.py  certify.baseline= -> the regression gate's reference entries, and the one
                  matcher (analysis/gate/compare.py `matches`) that finds a point's
    verdict.py    the one rule: ratio = measured / baseline, PASS at or above the threshold
    run.py        every item's points made and checked, the health gate, each item's sweep
                  (launchers/plan/sweep.py) and the wait for it (`launch status --wait`)
    judge.py      each point's figure (analysis/gate/reference.py `figures`), its baseline,
                  its verdict and provenance: verdict.json's rows
    command.py    the command: its keys, the order of the above, verdict.json, the report,
                  the results store, the archive, the exit status
"""
