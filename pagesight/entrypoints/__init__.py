"""The entry points: the command line (:mod:`pagesight.entrypoints.cli`) and the Ray Serve
application builder (:mod:`pagesight.entrypoints.serve_app`), which mounts the gateway as the
ingress. The only package that imports both the gateway and the services."""
