"""What the tests share and are not tests: plugins (fast_lane), children started by path
(loop_child, scripted_train, cluster_train_child, train_probe, serve_family, zero3_probe,
rank_probe/sitecustomize.py), and builders the tests import (ray_nodes, headless_chromium,
reencodings, two_ranks). tests/ is on sys.path (conftest.py's folder, pytest's prepend import
mode), so a test imports `from support.ray_nodes import two_node_cluster`."""
