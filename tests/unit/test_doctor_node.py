"""`launch doctor`'s NCCL rule (launchers/commands/doctor_node.py): the site's
NCCL_SOCKET_IFNAME and NCCL_IB_HCA against a node's interfaces and HCAs, as NCCL reads them
(prefixes, `=` exact, `^` exclusion, an HCA's `:port`)."""
import pytest

from launchers.commands.doctor_node import agrees

NICS, HCAS = ["eth0", "ib0", "lo"], ["mlx5_0", "mlx5_1"]


@pytest.mark.parametrize("env", [
    {}, {"NCCL_SOCKET_IFNAME": "ib"}, {"NCCL_SOCKET_IFNAME": "=ib0"}, {"NCCL_SOCKET_IFNAME": "^docker,lo"},
    {"NCCL_SOCKET_IFNAME": "bond,eth"}, {"NCCL_IB_HCA": "mlx5"}, {"NCCL_IB_HCA": "mlx5_1:1"},
    {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}, {"NCCL_DEBUG": "INFO"}])
def test_settings_the_node_has(env):
    assert agrees(env, NICS, HCAS) == []


def test_settings_the_node_lacks_are_named():
    assert agrees({"NCCL_SOCKET_IFNAME": "=ib", "NCCL_IB_HCA": "mlx4"}, NICS, HCAS) == [
        "NCCL_SOCKET_IFNAME==ib names none of the node's interfaces (eth0, ib0, lo)",
        "NCCL_IB_HCA=mlx4 names none of the node's HCAs (mlx5_0, mlx5_1)"]
    assert agrees({"NCCL_IB_HCA": "mlx5"}, NICS, []) == [
        "NCCL_IB_HCA=mlx5 names none of the node's HCAs (none)"]
