"""profile=true's trace (frameworks/common/profile.py: when, which rank): torch.profiler, CPU
(and CUDA) activities; its first step warms the profiler up (schedule warmup=1) and is left
out; a Chrome trace JSON, gzip'd (torch.profiler writes gzip where the name ends .gz; Perfetto and
HTA read it so), which the report splits into compute, communication and idle
(analysis/figures/trace_split.py)."""
import os

from contract import paths
from frameworks.common.profile import STEPS


def trace(folder, steps, session) -> dict:
    from torch.profiler import ProfilerActivity, profile, schedule
    path = os.path.join(folder, paths.TORCH_TRACE)
    cuda = session.cuda   # every PyTorch session says whether its rank is on a GPU
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=STEPS - 1),
                 on_trace_ready=lambda prof: prof.export_chrome_trace(path)) as prof:
        for _ in range(STEPS):
            steps(1)
            prof.step()
    return {"tool": "torch.profiler", "format": "Chrome trace JSON, gzip'd (ui.perfetto.dev, "
            "HTA)", "path": path, "traced_steps": STEPS - 1}
