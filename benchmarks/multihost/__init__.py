"""Several hosts simulated on one machine: network namespaces joined by a bridge (root only).

`netns` plans and builds the namespaces; `run` trains `examples/elastic_train.py` across
them with the elastic launcher and kills one "host" mid-run. See docs/ELASTIC.md.
"""
