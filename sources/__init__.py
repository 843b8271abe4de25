"""Reading objects, one way for every front end: files and stdin with source positions, `--state`, the
cluster (list/watch with paging) and the catalog. `lint` and `webhook` import it, never each other."""
