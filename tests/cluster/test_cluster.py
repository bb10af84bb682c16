"""The loop's cluster plumbing on a real two-node Ray cluster (tests/support/ray_nodes.py): joining it,
and refusing before anything loads a node that cannot read the run folder."""

import os

import pytest
from support.ray_nodes import two_node_cluster

from evoenv_cli.cluster import alive_nodes, check_shared_storage, connect
from evoenv_cli.errors import InputError

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_ray_left():
    yield
    import ray

    ray.shutdown()


def test_no_cluster_at_the_address_is_a_one_line_error():
    with pytest.raises(InputError) as e:
        connect("127.0.0.1:1")
    assert "iterate.cluster_address '127.0.0.1:1': no Ray cluster there" in str(e.value)
    assert "\n" not in str(e.value)


def _bwrap_works() -> bool:
    from evoenv_cli.runtime import sandbox

    try:
        sandbox.resolve("bwrap")
    except sandbox.SandboxUnavailable:
        return False
    return True


@pytest.mark.skipif(not _bwrap_works(), reason="the node without the folder is started under bubblewrap")
def test_every_node_must_read_the_run_folder(tmp_path):
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir()
    private.mkdir()
    with two_node_cluster(tmp_path / "c", hide=private) as c:
        ray = connect(c.address)
        nodes = alive_nodes(ray)
        assert len(nodes) == 2 and "node:__internal_head__" in nodes[0]["Resources"]
        assert check_shared_storage(ray, shared) == [n["NodeID"] for n in nodes]
        with pytest.raises(InputError) as e:
            check_shared_storage(ray, private)
        assert "1 of 2 cluster nodes cannot read the run folder" in str(e.value)
        assert os.listdir(private) == []  # the probe file is gone
