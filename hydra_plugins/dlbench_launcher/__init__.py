"""dlbench's own Hydra sweeper and launcher (conf/config.yaml selects both): every point of
a `-m` sweep composed (once per distinct combination of group choices), checked, and then
run or queued together. Hydra finds it in the `hydra_plugins` namespace package."""
