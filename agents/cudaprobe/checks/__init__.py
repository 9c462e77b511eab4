"""The checks, one module per check group: a module named `x` holds the checks with ids `x.*`, both how each is
judged (in the agent) and what it runs on a GPU worker (functions marked @gpu_task). A new module here is found
by registry.load_all; nothing else needs to change."""
