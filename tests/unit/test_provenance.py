"""What each point ran on (analysis/read/provenance.py), as a certification keeps it: from its
ranks' records as analysis.load reads them, the first rank that states a fact giving it."""
from types import SimpleNamespace

from analysis.read import provenance

IB = {"version": "2.21.5", "transport": "IB", "network": "IB", "devices": ["mlx5_0:1/IB"]}


def env(rank, host, **over):
    e = {"sweep": "s", "point": "p", "repeat": 0, "rank": rank, "host": host,
         "framework": {"name": "pytorch", "version": "2.13.0", "releases": {"torch": "2.13.0"}},
         "environment": {"device": "NVIDIA H100 80GB HBM3", "nvidia_driver": "560.35.03",
                         "cuda": "12.6", "nccl": "2.21.5"},
         "container": {"runtime": "enroot", "image": "/img/pt.sqsh", "digest": "sha256:" + "ab" * 32},
         "nccl": IB}
    e.update(over)
    return e


def test_a_points_image_versions_network_and_hosts():
    results = SimpleNamespace(environments=[
        env(0, "gpu01", nccl=None, framework={"name": "pytorch", "version": "2.13.0"}),
        env(1, "gpu02"), env(2, "gpu01")])
    p = provenance.of_points(results)[("s", "p")]
    assert p == {"image": "/img/pt.sqsh", "digest": "sha256:" + "ab" * 32, "runtime": "enroot",
                 "framework": "pytorch", "framework_version": "2.13.0",
                 "releases": {"torch": "2.13.0"}, "device": "NVIDIA H100 80GB HBM3",
                 "driver": "560.35.03", "cuda": "12.6", "nccl": "2.21.5", "nccl_network": "IB",
                 "hosts": ["gpu01", "gpu02"],
                 "image_label": "enroot /img/pt.sqsh (sha256:abababababab)"}


def test_a_venv_on_cpus_states_no_image_driver_or_network():
    results = SimpleNamespace(environments=[env(0, "node1", container=None, nccl=None,
                                                environment={"device": "cpu"})])
    p = provenance.of_points(results)[("s", "p")]
    assert (p["image"], p["driver"], p["nccl"], p["nccl_network"], p["image_label"]) == \
        (None, None, None, None, "none")
